import { createOutbox } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { ensureDemo, type DemoKeys } from '../../services/cli/src/commands/demo.ts';
import { startWorker } from '../../services/worker/src/index.ts';
import { startTestApi, testConfig, type TestApi } from './api.ts';
import { startTestBroker, type TestBroker } from './broker.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { startTestIngest } from './ingest.ts';

/** The demo tenant on a fresh database with every service running, as `gantry demo` has it, but no fleet yet. */
export interface DemoStack {
  db: TestDatabase;
  broker: TestBroker;
  api: TestApi;
  keys: DemoKeys;
  /** Stops ingest, the worker, the API and the broker, then drops the database. */
  stop(): Promise<void>;
}

/** Provisions the demo (3 customers' worth of keys) and starts a broker, the API, ingest and the worker on it. */
export async function startDemoStack(label: string): Promise<DemoStack> {
  const db = await createTestDatabase(label);
  const broker = await startTestBroker();
  const keys = await ensureDemo(db.pool, 3);
  const api = await startTestApi(db.pool, db.url);
  const ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url });
  const worker = startWorker({
    config: testConfig(db.url),
    pool: db.pool,
    logger: silentLogger(),
    outbox: createOutbox({ maxAttempts: 3 }),
    storageMode: db.mode,
  });
  return {
    db,
    broker,
    api,
    keys,
    async stop() {
      await ingest.stop();
      await worker.stop();
      await api.close();
      await broker.stop();
      await db.drop();
    },
  };
}
