import net from 'node:net';
import { loadConfig } from '@gantry/config';
import { createOutbox, onShutdown, openDatabase } from '@gantry/db';
import { createLogger } from '@gantry/logger';
import { startApiServer } from './server.ts';

/** Resolves when host:port of an MQTT URL accepts a TCP connection. */
export function probeTcp(url: string): Promise<void> {
  const parsed = new URL(url);
  const port = Number(parsed.port || (parsed.protocol === 'mqtts:' ? 8883 : 1883));
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: parsed.hostname, port });
    socket.setTimeout(2000, () => socket.destroy(new Error('timed out')));
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

/** The API on its own: `pnpm --filter @gantry/api start`. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ ...config.log, name: 'gantry-api' });
  if (!config.databaseUrl) throw new Error('GANTRY_DATABASE_URL is required to run the API on its own');
  // Bounded waits, so that while no primary answers (a failover) a request fails fast
  // with a 503 instead of hanging on a connection or a statement.
  const { pool } = await openDatabase({ ...config, databaseUrl: config.databaseUrl }, logger, 'gantry-api', {
    statementTimeoutMs: config.http.statementTimeoutMs,
    connectionTimeoutMs: 5_000,
  });
  const mqttUrl = config.mqtt.url;
  const server = await startApiServer(
    {
      config,
      pool,
      logger,
      outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }),
      readiness: {
        database: async () => void (await pool.query('SELECT 1')),
        ...(mqttUrl ? { broker: () => probeTcp(mqttUrl) } : {}),
      },
    },
    { host: config.http.host, port: config.http.port },
  );
  logger.info({ url: server.url }, 'API listening');
  onShutdown(logger, async () => {
    await server.close();
    await pool.end();
  });
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
