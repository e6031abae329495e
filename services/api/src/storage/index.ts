import type { Readable } from 'node:stream';
import type { Pool } from '@gantry/db';
import { createLocalDiskStorage } from './local-disk.ts';
import { createPostgresStorage } from './postgres.ts';

/**
 * Where uploaded files live (database chunks or local disk, beside the rows that
 * describe them), addressed by a key made of path-safe segments
 * (`<tenant>/<request>/<file>`). Every method streams; nothing holds a whole file in
 * memory.
 */
export interface FileStorage {
  /**
   * Streams `source` into the object `key`. The object becomes visible only once the
   * stream ended without error (no partial files); on error nothing is left behind and
   * the error (the source's own, say a size limit) is rethrown.
   */
  put(key: string, source: Readable): Promise<{ sizeBytes: number }>;
  /** The object's bytes as a stream, or null when it does not exist. */
  get(key: string): Promise<{ stream: Readable; sizeBytes: number } | null>;
  /** Removes the object; removing a missing object is not an error. */
  delete(key: string): Promise<void>;
}

/**
 * The deployment's file storage (GANTRY_FILE_STORAGE): the database, which every API
 * instance shares, or the local disk under `<dataDir>/files`.
 */
export function createFileStorage(
  config: { dataDir: string; fileStorage: 'database' | 'disk' },
  pool: Pool,
): FileStorage {
  const disk = createLocalDiskStorage(config.dataDir);
  return config.fileStorage === 'database' ? withDiskFallback(createPostgresStorage(pool), disk) : disk;
}

/**
 * Database storage that still serves, and deletes, what an instance has on its disk from
 * before the switch, so downloads keep working until `gantry files migrate` has run.
 */
function withDiskFallback(database: FileStorage, disk: FileStorage): FileStorage {
  return {
    put: (key, source) => database.put(key, source),
    async get(key) {
      return (await database.get(key)) ?? disk.get(key);
    },
    async delete(key) {
      await database.delete(key);
      await disk.delete(key);
    },
  };
}

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Builds a storage key from path-safe segments; refuses anything that could escape the root. */
export function storageKey(...segments: string[]): string {
  for (const segment of segments) {
    if (!SEGMENT.test(segment) || segment.includes('..')) throw new Error(`invalid storage key segment "${segment}"`);
  }
  return segments.join('/');
}
