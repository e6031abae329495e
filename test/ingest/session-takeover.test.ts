import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@gantry/logger';
import { startIngest, type RunningIngest } from '@gantry/ingest';
import { createPublisher, fleetTraffic, publishMessages } from '@gantry/simulator';
import { startEmbeddedBroker, type EmbeddedBroker } from '../../services/cli/src/embedded-broker.ts';
import { testConfig } from '../support/api.ts';
import { freePort, startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { countOf, provisionFleet, uniqueDeviceIds, waitFor } from '../support/ingest.ts';
import { spawnService, type ServiceProcess } from '../support/processes.ts';

let db: TestDatabase;
let broker: TestBroker;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('ingest_takeover');
  broker = await startTestBroker();
});

afterAll(async () => {
  for (const service of started) await service.kill();
  await broker?.stop();
  await db?.drop();
});

describe('two ingest processes with one client id', () => {
  it('one of them notices the takeover loop and stops with an error naming GANTRY_INGEST_CLIENT_ID; the other keeps ingesting', async () => {
    const deviceIds = uniqueDeviceIds(3, 'takeover');
    await provisionFleet(db.pool, deviceIds);
    const env = {
      GANTRY_DATABASE_URL: db.url,
      GANTRY_MQTT_URL: broker.url,
      // The same id for both, as two processes on one host with the default would have.
      GANTRY_INGEST_CLIENT_ID: `gantry-ingest-takeover-${randomBytes(3).toString('hex')}`,
      GANTRY_INGEST_SHARED_GROUP: '',
    };
    const first = await spawnService('ingest', { env });
    started.push(first);
    // Healthy at once: it takes the session from the first.
    const second = await spawnService('ingest', { env });
    started.push(second);

    // Mosquitto 2.0 closes the older connection without a DISCONNECT reason, so the
    // loop is noticed by its short connections; the first to count three stops.
    const stopped = await Promise.race(started.map((service) => service.exited.then(() => service)));
    const remaining = stopped === first ? second : first;
    expect((await stopped.exited).code).toBe(1);
    expect(stopped.stderr()).toMatch(/GANTRY_INGEST_CLIENT_ID/);
    expect(stopped.stderr()).toMatch(/closed 3 connections in a row|0x8E/);
    expect(stopped.stderr()).toContain(env.GANTRY_INGEST_CLIENT_ID);

    // The second holds the session and stores what devices publish from now on.
    const publisher = await createPublisher({ mqttUrl: broker.url });
    await publishMessages(publisher, [...fleetTraffic({ deviceIds, count: 300, start: Date.now() - 600_000 })]);
    await publisher.close();
    const stored = await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= 300,
      60_000,
      'readings stored by the remaining ingest',
    );
    expect(stored).toBe(300);
    const health = await fetch(`${remaining.url}/healthz`);
    expect(health.status).toBe(200);
  }, 240_000);
});

describe('two ingests with one client id on an MQTT 3.1.1 broker (no DISCONNECT reason)', () => {
  let aedes: EmbeddedBroker;
  const running: RunningIngest[] = [];

  beforeAll(async () => {
    aedes = await startEmbeddedBroker({ port: await freePort(), fixed: true }, silentLogger());
  });
  afterAll(async () => {
    for (const ingest of running) await ingest.stop().catch(() => undefined);
    await aedes?.stop();
  });

  it('the flapping is noticed after a few connections closed right after they were accepted, and one stops', async () => {
    const clientId = `gantry-ingest-flap-${randomBytes(3).toString('hex')}`;
    const config = testConfig(db.url, { GANTRY_MQTT_URL: aedes.url, GANTRY_INGEST_CLIENT_ID: clientId });
    const failures: Error[] = [];
    const start = () =>
      startIngest({
        config,
        pool: db.pool,
        logger: silentLogger(),
        storageMode: 'postgres',
        onFatal: (error) => failures.push(error),
      });
    running.push(await start());
    running.push(await start());
    await waitFor(
      async () => failures.length,
      (count) => count > 0,
      60_000,
      'a takeover error',
    );
    expect(failures[0]!.message).toMatch(/GANTRY_INGEST_CLIENT_ID/);
    expect(failures[0]!.message).toMatch(/closed 3 connections in a row/);
    expect(failures[0]!.message).toContain(clientId);
  });
});
