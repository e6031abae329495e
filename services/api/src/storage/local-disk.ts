import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { FileStorage } from './index.ts';

/**
 * Files on the local disk under `<dataDir>/files/<key>`. A put writes a temporary file
 * beside the target, fsyncs it and renames it into place, so a reader never sees half
 * a file and a crash leaves at most a `.partial` file behind.
 */
export function createLocalDiskStorage(dataDir: string): FileStorage {
  const root = path.resolve(dataDir, 'files');

  const resolveKey = (key: string): string => {
    const target = path.resolve(root, key);
    if (!target.startsWith(root + path.sep)) throw new Error(`storage key "${key}" escapes the storage root`);
    return target;
  };

  return {
    async put(key, source) {
      const target = resolveKey(key);
      await mkdir(path.dirname(target), { recursive: true });
      const partial = `${target}.${randomBytes(6).toString('hex')}.partial`;
      const output = createWriteStream(partial, { flags: 'wx' });
      try {
        await pipeline(source, output);
        const handle = await open(partial, 'r');
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
        await rename(partial, target);
      } catch (error) {
        // Make sure the source stops flowing before the temporary file goes away.
        source.destroy();
        await rm(partial, { force: true });
        throw error;
      }
      return { sizeBytes: (await stat(target)).size };
    },

    async get(key) {
      // Open first, then stat the open file: a concurrent delete cannot slip in between.
      let handle: Awaited<ReturnType<typeof open>>;
      try {
        handle = await open(resolveKey(key), 'r');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
      try {
        const { size } = await handle.stat();
        return { stream: handle.createReadStream(), sizeBytes: size };
      } catch (error) {
        await handle.close();
        throw error;
      }
    },

    async delete(key) {
      await rm(resolveKey(key), { force: true });
    },
  };
}
