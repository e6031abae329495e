import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fetchServedDocuments } from './served-document.ts';

// `pnpm lint:openapi`: the documents the API serves, written to a temporary folder and
// linted with Redocly's recommended rules (redocly.yaml at the root). Exits with the
// linter's status, so any error or warning fails the run.
const root = fileURLToPath(new URL('../../', import.meta.url));
const folder = mkdtempSync(path.join(tmpdir(), 'gantry-openapi-'));
try {
  const documents = await fetchServedDocuments();
  const files = Object.entries(documents).map(([name, document]) => {
    const file = path.join(folder, `${name}.openapi.json`);
    writeFileSync(file, JSON.stringify(document, null, 2));
    return file;
  });
  const result = spawnSync(
    path.join(root, 'node_modules/.bin/redocly'),
    ['lint', '--config', path.join(root, 'redocly.yaml'), '--max-problems', '500', ...files],
    {
      stdio: 'inherit',
      cwd: root,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    },
  );
  process.exitCode = result.status ?? 1;
} finally {
  rmSync(folder, { recursive: true, force: true });
}
