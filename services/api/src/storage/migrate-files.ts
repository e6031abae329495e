import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Pool } from '@gantry/db';
import { createLocalDiskStorage } from './local-disk.ts';
import { createPostgresStorage, findStoredFile } from './postgres.ts';

export interface FileMigrationSummary {
  /** Files of service requests (not deleted) looked at. */
  files: number;
  moved: number;
  bytesMoved: number;
  /** Already in the database with the recorded size and checksum: left alone. */
  alreadyMoved: number;
  /** Keys whose bytes are on neither side (lost before the move). */
  missing: string[];
  /** Keys whose copy did not read back with the recorded size and SHA-256: removed again. */
  mismatched: string[];
}

interface RecordedFile {
  storageKey: string;
  sizeBytes: number;
  sha256: string;
}

/**
 * Copies every service request file from `<dataDir>/files` into the database storage,
 * file by file, and verifies each copy by reading it back (size and SHA-256 against
 * what the upload recorded). A file already in the database with that size and checksum
 * is skipped, so a second run changes nothing. Disk files are left in place: the
 * operator removes `<dataDir>/files` once the API runs with the database storage.
 */
export async function migrateFilesToDatabase(
  pool: Pool,
  dataDir: string,
  onFile: (key: string, outcome: 'moved' | 'already_moved' | 'missing' | 'mismatched') => void = () => undefined,
): Promise<FileMigrationSummary> {
  const disk = createLocalDiskStorage(dataDir);
  const database = createPostgresStorage(pool);
  const summary: FileMigrationSummary = {
    files: 0,
    moved: 0,
    bytesMoved: 0,
    alreadyMoved: 0,
    missing: [],
    mismatched: [],
  };
  for (const file of await listRecordedFiles(pool)) {
    summary.files += 1;
    const present = await findStoredFile(pool, file.storageKey);
    if (present && present.sizeBytes === file.sizeBytes && present.sha256 === file.sha256) {
      summary.alreadyMoved += 1;
      onFile(file.storageKey, 'already_moved');
      continue;
    }
    const source = await disk.get(file.storageKey);
    if (!source) {
      summary.missing.push(file.storageKey);
      onFile(file.storageKey, 'missing');
      continue;
    }
    await database.put(file.storageKey, source.stream);
    const copy = await database.get(file.storageKey);
    const readBack = copy ? await measure(copy.stream) : null;
    if (readBack?.sizeBytes !== file.sizeBytes || readBack.sha256 !== file.sha256) {
      await database.delete(file.storageKey);
      summary.mismatched.push(file.storageKey);
      onFile(file.storageKey, 'mismatched');
      continue;
    }
    summary.moved += 1;
    summary.bytesMoved += file.sizeBytes;
    onFile(file.storageKey, 'moved');
  }
  return summary;
}

async function listRecordedFiles(pool: Pool): Promise<RecordedFile[]> {
  const { rows } = await pool.query<{ storage_key: string; size_bytes: string; sha256: string }>(
    `/* cli:listFilesToMigrate */ SELECT storage_key, size_bytes, sha256 FROM service_request_files
      WHERE deleted_at IS NULL ORDER BY created_at, id`,
  );
  return rows.map((row) => ({ storageKey: row.storage_key, sizeBytes: Number(row.size_bytes), sha256: row.sha256 }));
}

async function measure(stream: Readable): Promise<{ sizeBytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let sizeBytes = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    hash.update(chunk);
    sizeBytes += chunk.length;
  }
  return { sizeBytes, sha256: hash.digest('hex') };
}
