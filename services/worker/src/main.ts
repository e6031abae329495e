import { loadConfig } from '@gantry/config';
import { createOutbox, onShutdown, openDatabase } from '@gantry/db';
import { createLogger } from '@gantry/logger';
import { startWorker } from './worker.ts';

/** The worker on its own: `pnpm --filter @gantry/worker start`. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ ...config.log, name: 'gantry-worker' });
  if (!config.databaseUrl) throw new Error('GANTRY_DATABASE_URL is required to run the worker on its own');
  const { pool, storageMode } = await openDatabase({ ...config, databaseUrl: config.databaseUrl }, logger, 'gantry-worker');
  const worker = startWorker({ config, pool, logger, storageMode, outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }) });
  onShutdown(logger, async () => {
    await worker.stop();
    await pool.end();
  });
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
