// Compiles every package and service to dist/ (tsc -b over tsconfig.build.json, incremental:
// a second run with nothing changed takes a fraction of a second), then copies the files
// the code reads beside itself at run time (console and docs assets, the guide) from
// src/ to dist/, since tsc emits only what it compiles. The SQL of db/ stays at the
// repository root, where packages/db finds it from src/ and dist/ alike.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const workspaces = ['packages', 'services'].flatMap((parent) =>
  readdirSync(path.join(root, parent)).map((name) => path.join(root, parent, name)),
);

const tsc = createRequire(path.join(root, 'package.json')).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-b', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);

/** Every file under dir that tsc does not emit: anything but TypeScript. */
function* assets(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* assets(file);
    else if (!entry.name.endsWith('.ts')) yield file;
  }
}

for (const workspace of workspaces) {
  const src = path.join(workspace, 'src');
  for (const file of assets(src)) {
    const target = path.join(workspace, 'dist', path.relative(src, file));
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(file, target);
  }
}

// The CLI's bin (package.json, the image's `gantry`) runs by its shebang.
chmodSync(path.join(root, 'services/cli/dist/main.js'), 0o755);
