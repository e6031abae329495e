import path from 'node:path';
import pg from 'pg';
import { runner } from 'node-pg-migrate';
import type { Logger } from '@gantry/logger';
import { installGoldRelations } from './gold.ts';
import { maintainPartitions } from './partitions.ts';
import { dbDirectory } from './paths.ts';
import {
  applyRetentionPolicies,
  resolveStorageMode,
  type RequestedStorageMode,
  type StorageMode,
} from './storage-mode.ts';

/** Held for the whole migration so two processes starting together take turns. */
const MIGRATION_LOCK_KEY = 7_364_019_224_551;

export interface MigrateOptions {
  storageMode: RequestedStorageMode;
  retention?: { bronzeDays: number; readingDays: number };
  logger?: Logger;
  /**
   * The folder holding the SQL (migrations, storage-mode layers, gold definitions);
   * the repository's db/ by default. Upgrade tests migrate with an earlier copy of it.
   */
  directory?: string;
}

export interface MigrateResult {
  storageMode: StorageMode;
  applied: string[];
}

/**
 * Brings a database to the current schema: the shared migrations (db/migrations), the
 * layer of its storage mode (db/postgres or db/timescaledb), the gold relations
 * (db/gold), the retention policies (TimescaleDB) or the partitions of the days around
 * now (PostgreSQL mode). Safe to run again and from several processes.
 */
export async function migrateDatabase(databaseUrl: string, options: MigrateOptions): Promise<MigrateResult> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'gantry-migrate' });
  await client.connect();
  const logger = options.logger;
  const log = (message: string) => logger?.debug({ migration: message.trim() }, 'migration');
  const directory = options.directory ?? dbDirectory;
  try {
    await client.query('SET client_min_messages = warning');
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);

    const run = async (folder: string, table: string) =>
      runner({
        dbClient: client,
        dir: path.join(directory, folder),
        migrationsTable: table,
        direction: 'up',
        count: Infinity,
        noLock: true,
        singleTransaction: true,
        // Migrations are numbered per area (see docs/development.md), so a later-numbered
        // file may land before an earlier one; each still runs exactly once.
        checkOrder: false,
        log,
      });

    const applied = (await run('migrations', 'gantry_migrations')).map((m) => m.name);

    const storageMode = await resolveStorageMode(client, options.storageMode);
    await client.query(
      `INSERT INTO gantry_meta (key, value) VALUES ('storage_mode', to_jsonb($1::text))
       ON CONFLICT (key) DO NOTHING`,
      [storageMode],
    );
    const layer = storageMode === 'timescaledb' ? 'timescaledb' : 'postgres';
    applied.push(...(await run(layer, `gantry_migrations_${layer}`)).map((m) => `${layer}/${m.name}`));

    await client.query('BEGIN');
    await installGoldRelations(client, storageMode, logger, directory);
    if (options.retention) await applyRetentionPolicies(client, storageMode, options.retention);
    await client.query('COMMIT');
    // PostgreSQL mode: the days around now get their partitions before any process writes
    // (the worker keeps them ahead and applies retention from then on).
    if (storageMode === 'postgres') await maintainPartitions(client);

    if (applied.length > 0) logger?.info({ storageMode, applied }, 'database migrated');
    return { storageMode, applied };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
}
