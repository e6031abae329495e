import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests (and the global setup) read the workspace packages from their TypeScript sources,
// as the "gantry-source" export condition does for tsc and tsx, not from dist/: an alias
// per package applies wherever vitest loads a module. Processes the tests spawn run dist/.
const root = fileURLToPath(new URL('.', import.meta.url));
const workspaceSources = ['packages', 'services'].flatMap((parent) =>
  readdirSync(path.join(root, parent)).map((name) => ({
    find: `@gantry/${name}`,
    replacement: path.join(root, parent, name, 'src/index.ts'),
  })),
);

export default defineConfig({
  resolve: { alias: workspaceSources },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'test/bench/**'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    reporters: ['default'],
  },
});
