/**
 * The API alone in a process of its own, for `pnpm bench:api` (test/bench/api.ts): the
 * benchmark samples this process's memory during exports, untouched by the load
 * generator. Reads GANTRY_* from the environment; prints {"url"} on stdout once listening.
 */
import { startApiServer } from '@gantry/api';
import { loadConfig } from '@gantry/config';
import { createOutbox, createPool } from '@gantry/db';
import { silentLogger } from '@gantry/logger';

const config = loadConfig();
if (!config.databaseUrl) throw new Error('GANTRY_DATABASE_URL is required');
const pool = createPool(config.databaseUrl, { max: config.dbPoolSize, applicationName: 'gantry-bench-api' });
const server = await startApiServer(
  {
    config,
    pool,
    logger: silentLogger(),
    outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }),
    readiness: {},
  },
  { host: '127.0.0.1', port: 0 },
);
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
const stop = async () => {
  await server.close();
  await pool.end();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
