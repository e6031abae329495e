import { loadConfig } from '@gantry/config';
import { onShutdown, openDatabase } from '@gantry/db';
import { createLogger } from '@gantry/logger';
import { startMetricsServer } from '@gantry/observability';
import v8 from 'node:v8';
import { collectDefaultMetrics } from 'prom-client';
import { startIngest } from './ingest.ts';

/** The ingest on its own: `pnpm --filter @gantry/ingest start`. */
async function main(): Promise<void> {
  const config = loadConfig();
  // How far V8 lets the old generation grow past what survived its last full collection.
  // By default up to 4 × on a machine with memory to spare: under ingest's allocation
  // rate that was ~130 MiB of heap for ~35 MiB live, and the RSS target missed.
  // 2 × (100) costs a few % of CPU in more full collections (docs/ingest.md, "Measured");
  // unlike an old-space limit, it scales with the live data and never runs out.
  if (config.ingest.heapGrowthPercent > 0)
    v8.setFlagsFromString(`--heap-growing-percent=${config.ingest.heapGrowthPercent}`);
  const logger = createLogger({ ...config.log, name: 'gantry-ingest' });
  if (!config.databaseUrl) throw new Error('GANTRY_DATABASE_URL is required to run ingest on its own');
  if (config.ingest.source === 'mqtt' && !config.mqtt.url)
    throw new Error('GANTRY_MQTT_URL is required to run ingest on its own');
  if (config.ingest.source === 'nats' && config.nats.urls.length === 0)
    throw new Error('GANTRY_NATS_URLS is required with GANTRY_INGEST_SOURCE=nats');
  collectDefaultMetrics();
  const { pool, storageMode } = await openDatabase(
    { ...config, databaseUrl: config.databaseUrl },
    logger,
    'gantry-ingest',
  );
  const ingest = await startIngest({ config, pool, logger, storageMode });
  const metrics = await startMetricsServer({
    host: config.http.host,
    port: config.ingest.metricsPort,
    health: () => ({
      healthy: ingest.isConnected(),
      detail: { [config.ingest.source]: ingest.isConnected() ? 'connected' : 'disconnected' },
    }),
  });
  logger.info({ port: metrics.port }, 'ingest metrics and health listening');
  onShutdown(logger, async () => {
    await ingest.stop();
    await metrics.close();
    await pool.end();
  });
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
