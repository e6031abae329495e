import { findRunningEmbeddedPostgres, migrateDatabase, startEmbeddedPostgres } from '@gantry/db';
import type { CommandContext } from './command.ts';

/**
 * The database a command works on: GANTRY_DATABASE_URL when set, else the data
 * directory's embedded PostgreSQL — the one `gantry start` runs, or, when none runs,
 * started for this command (migrated, as `start` would) and stopped once `use` is done.
 */
export async function withDatabase<T>(context: CommandContext, use: (url: string) => Promise<T>): Promise<T> {
  const { config, logger } = context;
  if (config.databaseUrl) return use(config.databaseUrl);
  const running = await findRunningEmbeddedPostgres(config.dataDir);
  if (running) {
    logger.debug({ pid: running.pid }, 'using the embedded PostgreSQL of the data directory');
    return use(running.url);
  }
  logger.info(
    { dataDir: config.dataDir },
    'GANTRY_DATABASE_URL is not set and no embedded PostgreSQL runs: starting it for this command',
  );
  const embedded = await startEmbeddedPostgres({
    dataDir: config.dataDir,
    port: config.embeddedPostgresPort,
    fixedPort: config.fixedPorts.embeddedPostgres,
    logger,
  });
  try {
    if (!embedded.reused && config.runMigrations) {
      await migrateDatabase(embedded.url, { storageMode: config.storageMode, retention: config.retention, logger });
    }
    return await use(embedded.url);
  } finally {
    if (!embedded.reused) await embedded.stop();
  }
}
