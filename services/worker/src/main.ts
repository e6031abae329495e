import { loadConfig } from '@gantry/config';
import { createOutbox, onShutdown, openDatabase } from '@gantry/db';
import { createLogger } from '@gantry/logger';
import { startMetricsServer } from '@gantry/observability';
import { collectDefaultMetrics } from 'prom-client';
import { startWorker } from './worker.ts';

/** The worker on its own: `pnpm --filter @gantry/worker start`. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ ...config.log, name: 'gantry-worker' });
  if (!config.databaseUrl) throw new Error('GANTRY_DATABASE_URL is required to run the worker on its own');
  collectDefaultMetrics();
  const { pool, storageMode } = await openDatabase(
    { ...config, databaseUrl: config.databaseUrl },
    logger,
    'gantry-worker',
  );
  const worker = startWorker({
    config,
    pool,
    logger,
    storageMode,
    outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }),
  });
  const metrics = await startMetricsServer({
    host: config.http.host,
    port: config.worker.metricsPort,
    health: () =>
      pool.query('SELECT 1').then(
        () => ({ healthy: true, detail: { database: 'reachable' } }),
        () => ({ healthy: false, detail: { database: 'unreachable' } }),
      ),
  });
  logger.info({ port: metrics.port }, 'worker metrics and health listening');
  onShutdown(logger, async () => {
    await worker.stop();
    await metrics.close();
    await pool.end();
  });
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
