import type { Readable } from 'node:stream';
import { createLocalDiskStorage } from './local-disk.ts';

/**
 * Where uploaded files live: outside the database rows, addressed by a key made of
 * path-safe segments (`<tenant>/<request>/<file>`). Every method streams; nothing holds
 * a whole file in memory.
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

/** The deployment's file storage: the local disk under `<dataDir>/files`. */
export function createFileStorage(config: { dataDir: string }): FileStorage {
  return createLocalDiskStorage(config.dataDir);
}

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Builds a storage key from path-safe segments; refuses anything that could escape the root. */
export function storageKey(...segments: string[]): string {
  for (const segment of segments) {
    if (!SEGMENT.test(segment) || segment.includes('..')) throw new Error(`invalid storage key segment "${segment}"`);
  }
  return segments.join('/');
}

export { createLocalDiskStorage };
