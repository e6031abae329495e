// Assembles what production runs into <dir> (the image's /app): the workspace manifests,
// each package's and service's dist/ (JavaScript, source maps and the assets copied beside
// it; no TypeScript, no declarations), db/ (migrations and SQL, read from the repository
// root at run time), then installs the production dependencies only, from the lockfile.
//
//   node scripts/assemble-production.mjs <dir> [--offline]
//
// Run it after `pnpm build`. --offline installs from the local pnpm store alone (the test
// that checks the image's install does so; the Dockerfile downloads).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [target, ...flags] = process.argv.slice(2);
if (!target || flags.some((flag) => flag !== '--offline')) {
  console.error('usage: node scripts/assemble-production.mjs <dir> [--offline]');
  process.exit(2);
}
const root = fileURLToPath(new URL('..', import.meta.url));
const destination = path.resolve(target);
mkdirSync(destination, { recursive: true });

// The root manifest without its scripts: `prepare` would build, and production has no
// compiler. Its dependency lists stay as they are, for the frozen lockfile to match.
const { scripts: _scripts, ...manifest } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
writeFileSync(path.join(destination, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
for (const file of ['pnpm-lock.yaml', 'pnpm-workspace.yaml'])
  cpSync(path.join(root, file), path.join(destination, file));
cpSync(path.join(root, 'db'), path.join(destination, 'db'), { recursive: true });

/** What a package runs: compiled JavaScript, its source maps and the assets beside it. */
const runtimeFile = (source) => !source.endsWith('.d.ts') && !source.endsWith('.tsbuildinfo');

for (const parent of ['packages', 'services']) {
  for (const name of readdirSync(path.join(root, parent))) {
    const from = path.join(root, parent, name);
    const to = path.join(destination, parent, name);
    if (!existsSync(path.join(from, 'dist'))) {
      console.error(`${parent}/${name}/dist is missing: run pnpm build first`);
      process.exit(1);
    }
    mkdirSync(to, { recursive: true });
    cpSync(path.join(from, 'package.json'), path.join(to, 'package.json'));
    cpSync(path.join(from, 'dist'), path.join(to, 'dist'), { recursive: true, filter: runtimeFile });
  }
}

const install = spawnSync('pnpm', ['install', '--prod', '--frozen-lockfile', ...flags], {
  cwd: destination,
  stdio: 'inherit',
});
process.exit(install.status ?? 1);
