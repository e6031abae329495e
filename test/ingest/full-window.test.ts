import { afterAll, beforeAll, describe, it } from 'vitest';
import { createPublisher, fleetTraffic, publishMessages, type Publisher } from '@gantry/simulator';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import {
  countOf,
  provisionFleetBulk,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type TestIngest,
} from '../support/ingest.ts';

const MESSAGES = 300;
const MAX_IN_FLIGHT = 25;

let db: TestDatabase;
let broker: TestBroker;
let ingest: TestIngest | undefined;
let publisher: Publisher | undefined;

beforeAll(async () => {
  db = await createTestDatabase('full_window');
  broker = await startTestBroker();
});

afterAll(async () => {
  await publisher?.close();
  await ingest?.stop();
  await broker?.stop();
  await db?.drop();
});

describe('ingest with a full in-flight window', () => {
  it('closes the open batch when the window fills instead of waiting out the batch time', async () => {
    const deviceIds = uniqueDeviceIds(10, 'window');
    await provisionFleetBulk(db.pool, deviceIds);
    // A batch would wait ten minutes for its time and hold 2,000 messages; the window holds 25.
    ingest = await startTestIngest({
      pool: db.pool,
      databaseUrl: db.url,
      mqttUrl: broker.url,
      env: {
        GANTRY_INGEST_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
        GANTRY_INGEST_BATCH_MS: '600000',
        GANTRY_INGEST_BATCH_SIZE: '2000',
      },
    });
    publisher = await createPublisher({ mqttUrl: broker.url });
    await publishMessages(
      publisher,
      fleetTraffic({ deviceIds, count: MESSAGES, start: Date.now() - 600_000, stepMs: 1000 }),
      { rate: 500 },
    );
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= MESSAGES,
      60_000,
      'every reading committed',
    );
  });
});
