import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool, migrateDatabase, type Pool } from '@gantry/db';
import { ingestMetrics } from '@gantry/ingest';
import { createPublisher, fleetTraffic, publishMessages, type Publisher } from '@gantry/simulator';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import {
  countOf,
  provisionFleetBulk,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type TestIngest,
} from '../support/ingest.ts';
import { postgresBinDir, startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';

const MESSAGES = 20_000;
const MAX_IN_FLIGHT = 4000;

let server: PrivatePostgres | undefined;
let pool: Pool | undefined;
let broker: TestBroker | undefined;
let ingest: TestIngest | undefined;
let publisher: Publisher | undefined;

afterAll(async () => {
  await publisher?.close();
  await ingest?.stop();
  await broker?.stop();
  await pool?.end();
  await server?.destroy();
});

async function gauge(metric: { get(): Promise<{ values: Array<{ value: number }> }> }): Promise<number> {
  return (await metric.get()).values[0]?.value ?? 0;
}

// Needs PostgreSQL server binaries to run a private cluster (the shared one is never stopped).
describe.skipIf(postgresBinDir() === null)('ingest while PostgreSQL is down', () => {
  it('stops acknowledging for a 10 s outage, holds a bounded number of messages, and resumes without losing or duplicating any', async () => {
    server = await startPrivatePostgres();
    await migrateDatabase(server.url, { storageMode: 'postgres' });
    pool = createPool(server.url, { max: 8, applicationName: 'gantry-outage-test' });
    const deviceIds = uniqueDeviceIds(100, 'outage');
    await provisionFleetBulk(pool, deviceIds);
    broker = await startTestBroker();
    ingest = await startTestIngest({
      pool,
      databaseUrl: server.url,
      mqttUrl: broker.url,
      env: { GANTRY_INGEST_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT), GANTRY_INGEST_STATEMENT_TIMEOUT_MS: '5000' },
    });
    publisher = await createPublisher({ mqttUrl: broker.url });
    const retriesBefore = await gauge(ingestMetrics.commitRetries);

    const publishing = publishMessages(
      publisher,
      fleetTraffic({ deviceIds, count: MESSAGES, start: Date.now() - 3_600_000, stepMs: 100 }),
      { rate: 1500 },
    );
    await waitFor(
      () => countOf(pool!, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= 2000,
      60_000,
      'readings before the outage',
    );

    await server.stop();
    let maxUnacked = 0;
    const outageEnds = Date.now() + 10_000;
    while (Date.now() < outageEnds) {
      maxUnacked = Math.max(maxUnacked, await gauge(ingestMetrics.inFlight));
      await sleep(50);
    }
    await server.start();

    await publishing;
    const stored = await waitFor(
      () => countOf(pool!, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= MESSAGES,
      120_000,
      'every reading',
    );
    expect(stored).toBe(MESSAGES);
    expect(await countOf(pool, 'SELECT count(DISTINCT (device_id, type, ts)) FROM telemetry_readings')).toBe(MESSAGES);
    await waitFor(
      () => countOf(pool!, 'SELECT sum(reading_count) AS count FROM device_messages'),
      (count) => count >= MESSAGES,
      30_000,
      'bronze',
    );
    expect(await countOf(pool, 'SELECT sum(reading_count) AS count FROM device_messages')).toBe(MESSAGES);
    expect(await countOf(pool, `SELECT count(*) FROM device_messages WHERE status = 'rejected'`)).toBe(0);

    // The outage really happened and ingest held back rather than buffering everything.
    expect((await gauge(ingestMetrics.commitRetries)) - retriesBefore).toBeGreaterThan(0);
    expect(maxUnacked).toBeGreaterThan(0);
    expect(maxUnacked).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    expect(ingest.isConnected()).toBe(true);
  });
});
