import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** A file the console serves, kept in memory plain and gzipped, with an ETag of its content. */
export interface ServedFile {
  raw: Buffer;
  gzip: Buffer;
  etag: string;
  type: string;
}

const require = createRequire(import.meta.url);

/**
 * The folder of an installed package, found from its main entry (some packages, lit-html
 * among them, do not export their package.json). Resolved at run time from the API's own
 * dependencies, so the browser gets exactly the versions the lockfile installed.
 */
function packageDir(name: string): string {
  let dir = path.dirname(require.resolve(name));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name)
      return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`package ${name} has no package.json above its entry`);
    dir = parent;
  }
}

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

/**
 * Third-party files, served under /console/vendor/<name> straight from node_modules:
 * ES modules the browser imports as they are (no bundler, no build step, no CDN).
 */
export const vendorFiles: Record<string, { file: string; type: string }> = {
  'lit-html.js': { file: path.join(packageDir('lit-html'), 'lit-html.js'), type: JS },
  'leaflet.js': { file: path.join(packageDir('leaflet'), 'dist', 'leaflet-src.esm.js'), type: JS },
  'leaflet.css': { file: path.join(packageDir('leaflet'), 'dist', 'leaflet.css'), type: CSS },
  'uplot.js': { file: path.join(packageDir('uplot'), 'dist', 'uPlot.esm.js'), type: JS },
  'uplot.css': { file: path.join(packageDir('uplot'), 'dist', 'uPlot.min.css'), type: CSS },
};

/** The console's own files: every .js and .css of ./assets, served under /console/assets/<name>. */
const assetsDir = fileURLToPath(new URL('./assets/', import.meta.url));
export const assetFiles: Record<string, { file: string; type: string }> = Object.fromEntries(
  readdirSync(assetsDir)
    .filter((name) => /^[a-z0-9-]+\.(js|css)$/.test(name))
    .sort()
    .map((name) => [name, { file: path.join(assetsDir, name), type: name.endsWith('.css') ? CSS : JS }]),
);

const loaded = new Map<string, ServedFile>();

/** Reads, compresses and hashes a file once; later requests get it from memory. */
export function servedFile(entry: { file: string; type: string }): ServedFile {
  let served = loaded.get(entry.file);
  if (!served) {
    const raw = readFileSync(entry.file);
    served = {
      raw,
      gzip: gzipSync(raw, { level: 9 }),
      etag: `"${createHash('sha256').update(raw).digest('base64url').slice(0, 22)}"`,
      type: entry.type,
    };
    loaded.set(entry.file, served);
  }
  return served;
}
