import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@gantry/logger';
import { createPublisher, fleetTraffic, publishMessages } from '@gantry/simulator';
import { startEmbeddedBroker, type EmbeddedBroker } from '../../services/cli/src/embedded-broker.ts';
import { freePort } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import {
  countOf,
  provisionFleet,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type TestIngest,
} from '../support/ingest.ts';

let db: TestDatabase;
let broker: EmbeddedBroker;

beforeAll(async () => {
  db = await createTestDatabase('ingest_aedes');
  broker = await startEmbeddedBroker({ port: await freePort(), fixed: true }, silentLogger());
});

afterAll(async () => {
  await broker?.stop();
  await db?.drop();
});

describe('ingest against the embedded broker of the zero-setup start (aedes, MQTT 3.1.1 only)', () => {
  it('falls back to MQTT 3.1.1 with a persistent session and loses nothing published while it was stopped', async () => {
    const deviceIds = uniqueDeviceIds(5, 'aedes');
    await provisionFleet(db.pool, deviceIds);
    const env = { GANTRY_INGEST_CLIENT_ID: `gantry-ingest-aedes-${deviceIds[0]}` };
    let ingest: TestIngest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url, env });
    const publisher = await createPublisher({ mqttUrl: broker.url });
    const traffic = [...fleetTraffic({ deviceIds, count: 2000, start: Date.now() - 3_600_000 })];

    await publishMessages(publisher, traffic.slice(0, 1000));
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= 1000,
      30_000,
      'first half',
    );
    await ingest.stop();

    // Published while no ingest runs: the broker keeps them in the ingest's session.
    await publishMessages(publisher, traffic.slice(1000));
    ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url, env });
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= 2000,
      30_000,
      'second half',
    );
    expect(await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings')).toBe(2000);
    expect(await countOf(db.pool, `SELECT count(*) FROM device_messages WHERE status = 'accepted'`)).toBe(2000);
    await publisher.close();
    await ingest.stop();
  });
});
