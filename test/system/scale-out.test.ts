import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '@gantry/db';
import {
  createPublisher,
  destination,
  haversineM,
  MachineScript,
  publishMessages,
  randomSource,
  toBatches,
  type LatLon,
  type SimulatedMessage,
} from '@gantry/simulator';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { killAllServices, spawnService, type ServiceProcess } from '../support/processes.ts';
import { DAY, HOUR, metricSum, readMetrics, waitUntil } from './support.ts';

// Scale-out gives the same answers: one broker, one published fleet, two fresh databases.
// A is fed by one ingest and derived by one worker; B by two ingests sharing one MQTT 5
// subscription group and two workers claiming devices side by side. Every stored and
// derived row must be the same in both. The two groups each get every message, so both
// databases see the very same traffic.

const RUN = randomBytes(3).toString('hex');
const DEVICES = 12;
/** Devices that upload their day late, as shuffled batches (store-and-forward): late data for derivation. */
const BATCH_UPLOADERS = new Set([2, 7, 10]);
const DAY0 = Math.floor(Date.now() / DAY) * DAY - DAY;
const YARD: LatLon = { lat: 51.9542, lon: 4.0529 };
const ZONE_HALF_M = 80;

/** Fixed ids, so both databases hold the same tenant, assets and devices — and derive the same session ids. */
const uuid = (kind: number, index: number) =>
  `00000000-0000-4000-8${kind.toString(16).padStart(3, '0')}-${index.toString(16).padStart(12, '0')}`;
const TENANT_ID = uuid(1, 1);
const GEOFENCE_ID = uuid(2, 1);
const fleet = Array.from({ length: DEVICES }, (_, index) => ({
  assetId: uuid(3, index + 1),
  deviceUuid: uuid(4, index + 1),
  deviceId: `scale-${RUN}-${String(index + 1).padStart(2, '0')}`,
}));

let broker: TestBroker;
let one: TestDatabase;
let two: TestDatabase;
const processes: Record<'one' | 'two', { ingests: ServiceProcess[]; workers: ServiceProcess[] }> = {
  one: { ingests: [], workers: [] },
  two: { ingests: [], workers: [] },
};
let published: SimulatedMessage[] = [];
let readingCount = 0;

async function provision(pool: Pool): Promise<void> {
  await pool.query(`INSERT INTO tenants (id, name) VALUES ($1, 'Scale-out terminal')`, [TENANT_ID]);
  await pool.query(
    `INSERT INTO assets (id, tenant_id, name, identifier) SELECT a, $1, 'Machine ' || n, 'M-' || n FROM unnest($2::uuid[]) WITH ORDINALITY AS u(a, n)`,
    [TENANT_ID, fleet.map((entry) => entry.assetId)],
  );
  await pool.query(
    `INSERT INTO devices (id, tenant_id, device_id, asset_id) SELECT d, $1, t, a FROM unnest($2::uuid[], $3::text[], $4::uuid[]) AS u(d, t, a)`,
    [
      TENANT_ID,
      fleet.map((entry) => entry.deviceUuid),
      fleet.map((entry) => entry.deviceId),
      fleet.map((entry) => entry.assetId),
    ],
  );
  const dLat = ZONE_HALF_M / 111_320;
  const dLon = ZONE_HALF_M / (111_320 * Math.cos((YARD.lat * Math.PI) / 180));
  const [minLon, minLat, maxLon, maxLat] = [YARD.lon - dLon, YARD.lat - dLat, YARD.lon + dLon, YARD.lat + dLat];
  const geometry = {
    type: 'Polygon',
    coordinates: [
      [
        [minLon, minLat],
        [maxLon, minLat],
        [maxLon, maxLat],
        [minLon, maxLat],
        [minLon, minLat],
      ],
    ],
  };
  await pool.query(
    `INSERT INTO geofences (id, tenant_id, name, type, geometry, bbox) VALUES ($1, $2, 'Yard centre', 'forbidden', $3, $4)`,
    [GEOFENCE_ID, TENANT_ID, JSON.stringify(geometry), [minLon, minLat, maxLon, maxLat]],
  );
}

/**
 * A deterministic day of a small fleet (yesterday, so nothing depends on the time it is
 * derived at): per machine two shifts of trips, container moves, logins, shocks, a poor
 * fix now and then, pauses and an occasional coverage gap; routes cross the yard centre.
 */
function fleetDay(): SimulatedMessage[] {
  const random = randomSource(20_240_611);
  const whole = (min: number, spread: number) => Math.round(min + random() * spread);
  const live: SimulatedMessage[] = [];
  const batches: SimulatedMessage[] = [];
  for (const [index, entry] of fleet.entries()) {
    const home = destination(YARD, whole(150, 600), random() * 360);
    const machine = new MachineScript({
      deviceId: entry.deviceId,
      start: DAY0 + 6 * HOUR + index * 97_000,
      position: home,
      gpsEveryS: 10,
      heartbeatEveryS: 120,
    });
    let here = home;
    // A drive too short to be movement (under 30 m) is left out.
    const drive = (to: LatLon, speedKmh: number) => {
      if (haversineM(here, to) < 30) return false;
      machine.drive(to, speedKmh);
      here = to;
      return true;
    };
    machine.idle(whole(60, 600));
    for (let shift = 0; shift < 2; shift += 1) {
      machine.ignitionOn();
      if (random() < 0.8) machine.login(`OP-${whole(1, 4)}`);
      const trips = whole(2, 2);
      for (let trip = 0; trip < trips; trip += 1) {
        const pickup =
          random() < 0.4
            ? destination(YARD, whole(0, 40), random() * 360)
            : destination(home, whole(200, 500), random() * 360);
        drive(pickup, whole(8, 10));
        if (random() < 0.7) {
          machine.lift().idle(whole(20, 40));
          drive(destination(pickup, whole(100, 300), random() * 360), whole(6, 8));
          machine.idle(whole(10, 30)).drop();
        }
        machine.idle(whole(30, 200));
        if (random() < 0.4) machine.shock(1.5 + random() * 2);
        if (random() < 0.15) machine.badFix('poor_hdop');
        if (random() < 0.15) machine.login(`OP-${whole(1, 4)}`);
      }
      drive(home, 12);
      machine.idle(whole(20, 60));
      if (random() < 0.5) machine.logout();
      machine.ignitionOff().idle(whole(300, 1500));
      if (random() < 0.3) machine.silence(whole(900, 1800));
    }
    const messages = machine.messages();
    readingCount += messages.length;
    if (BATCH_UPLOADERS.has(index)) batches.push(...toBatches(messages, { size: 40 }));
    else live.push(...messages);
  }
  // Live devices publish in device-time order; the uploaders' batches arrive in any order
  // among them; a few messages are sent twice (QoS 1 redelivery, device resends).
  const ordered = live.sort((a, b) => a.ts - b.ts);
  for (const batch of batches) ordered.splice(Math.floor(random() * (ordered.length + 1)), 0, batch);
  const resent = ordered.filter(() => random() < 0.02);
  for (const message of resent) ordered.splice(Math.floor(random() * (ordered.length + 1)), 0, message);
  return ordered;
}

function spawnStack(db: TestDatabase, group: string, ingests: number, workers: number) {
  const database = { GANTRY_DATABASE_URL: db.url };
  return Promise.all([
    Promise.all(
      Array.from({ length: ingests }, (_, index) =>
        spawnService('ingest', {
          env: {
            ...database,
            GANTRY_MQTT_URL: broker.url,
            GANTRY_INGEST_SHARED_GROUP: group,
            GANTRY_INGEST_CLIENT_ID: `${group}-${index + 1}`,
            GANTRY_INGEST_BATCH_MS: '50',
            GANTRY_INGEST_BATCH_SIZE: '200',
          },
        }),
      ),
    ),
    Promise.all(
      Array.from({ length: workers }, () =>
        spawnService('worker', {
          // Two devices per claim, so two workers share a dozen devices rather than one taking all.
          env: {
            ...database,
            GANTRY_WORKER_POLL_MS: '100',
            GANTRY_GOLD_REFRESH_MS: '500',
            GANTRY_WORKER_DEVICE_BATCH: '2',
          },
        }),
      ),
    ),
  ]);
}

async function settled(pool: Pool): Promise<boolean> {
  const { rows } = await pool.query<{ stored: string; queued: string; invalid: string }>(
    `SELECT (SELECT count(*) FROM device_messages) AS stored, (SELECT count(*) FROM derivation_queue) AS queued,
            (SELECT count(*) FROM gold_invalidations WHERE relation LIKE 'utilization%') AS invalid`,
  );
  const row = rows[0]!;
  return Number(row.stored) >= published.length && Number(row.queued) === 0 && Number(row.invalid) === 0;
}

beforeAll(async () => {
  published = fleetDay();
  [broker, one, two] = await Promise.all([
    startTestBroker(),
    createTestDatabase('scale_out_one'),
    createTestDatabase('scale_out_two'),
  ]);
  await Promise.all([provision(one.pool), provision(two.pool)]);
  const [[ingestsOne, workersOne], [ingestsTwo, workersTwo]] = await Promise.all([
    spawnStack(one, `scale-one-${RUN}`, 1, 1),
    spawnStack(two, `scale-two-${RUN}`, 2, 2),
  ]);
  processes.one = { ingests: ingestsOne, workers: workersOne };
  processes.two = { ingests: ingestsTwo, workers: workersTwo };

  const publisher = await createPublisher({ mqttUrl: broker.url, clientIdPrefix: `scale-${RUN}` });
  await publishMessages(publisher, published, { qos: 1 });
  await publisher.close();

  // Hang guards: every message in bronze, nothing left to derive or refresh, twice in a row.
  for (const db of [one, two]) {
    for (let stable = 0; stable < 2; stable += 1) {
      await waitUntil(
        `${db.name} to store, derive and refresh everything`,
        () => settled(db.pool),
        (done) => done,
        120_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}, 240_000);

afterAll(async () => {
  await killAllServices();
  await broker?.stop();
  await one?.drop();
  await two?.drop();
});

/** Every row of a query as text (PostgreSQL's own JSON of the row), sorted. */
async function rowsOf(pool: Pool, sql: string): Promise<string[]> {
  const { rows } = await pool.query<{ row: string }>(`SELECT row::text AS row FROM (${sql}) AS q(row) ORDER BY 1`);
  return rows.map((row) => row.row);
}

/** Equal as sets: same count, nothing on one side only (a few differing rows are named). */
function expectSameRows(what: string, a: string[], b: string[]) {
  const inA = new Set(a);
  const inB = new Set(b);
  const onlyA = a.filter((row) => !inB.has(row));
  const onlyB = b.filter((row) => !inA.has(row));
  expect({
    what,
    count: b.length,
    onlyInOneProcessEach: onlyA.slice(0, 3),
    onlyInTwoProcessesEach: onlyB.slice(0, 3),
  }).toEqual({
    what,
    count: a.length,
    onlyInOneProcessEach: [],
    onlyInTwoProcessesEach: [],
  });
  expect(a.length).toBeGreaterThan(0);
}

async function compare(what: string, sql: string) {
  const [a, b] = await Promise.all([rowsOf(one.pool, sql), rowsOf(two.pool, sql)]);
  expectSameRows(what, a, b);
  return a;
}

describe('two ingests on a shared subscription and two workers', () => {
  it('both shared the work: each ingest stored messages and each worker derived devices', async () => {
    const stored = await Promise.all(
      processes.two.ingests.map(async (ingest) =>
        metricSum(await readMetrics(ingest.url), 'gantry_ingest_messages_stored_total'),
      ),
    );
    for (const count of stored) expect(count).toBeGreaterThan(0);
    // Together they stored every message (at least once: a redelivery would be stored again as a duplicate).
    expect(stored.reduce((sum, count) => sum + count, 0)).toBeGreaterThanOrEqual(published.length);
    const [single] = await Promise.all(
      processes.one.ingests.map(async (ingest) =>
        metricSum(await readMetrics(ingest.url), 'gantry_ingest_messages_stored_total'),
      ),
    );
    expect(single).toBeGreaterThanOrEqual(published.length);

    const runs = await Promise.all(
      processes.two.workers.map(async (worker) =>
        metricSum(await readMetrics(worker.url), 'gantry_derivation_device_runs_total'),
      ),
    );
    for (const count of runs) expect(count).toBeGreaterThan(0);
  });

  it('stores the same silver readings: count, distinct keys and values', async () => {
    const keys = `SELECT count(*) AS n, count(DISTINCT (device_id, type, ts)) AS k FROM telemetry_readings`;
    const [a, b] = await Promise.all([one.pool.query(keys), two.pool.query(keys)]);
    expect(a.rows[0]).toEqual({ n: readingCount, k: readingCount });
    expect(b.rows[0]).toEqual(a.rows[0]);
    // Everything but the receive time, which is the processing's own.
    await compare('telemetry_readings', `SELECT to_jsonb(r) - 'received_at' FROM telemetry_readings r`);
  });

  it('derives the same segments, usage sessions and identifier sessions', async () => {
    // Whole rows: session ids too (a hash of device id, kind and start), and nothing of
    // these tables is a time of processing.
    const segments = await compare('telemetry_segments', `SELECT to_jsonb(s) FROM telemetry_segments s`);
    expect(segments.length).toBeGreaterThan(DEVICES * 10);
    const usage = await compare('usage_sessions', `SELECT to_jsonb(u) FROM usage_sessions u`);
    expect(usage.length).toBeGreaterThanOrEqual(DEVICES * 2);
    await compare('identifier_sessions', `SELECT to_jsonb(i) FROM identifier_sessions i`);
    await compare('geofence_memberships', `SELECT to_jsonb(m) FROM geofence_memberships m`);
  });

  it('refreshes the same gold utilization per hour and per day', async () => {
    await compare('utilization_hourly', `SELECT to_jsonb(h) FROM utilization_hourly h`);
    await compare('utilization_daily', `SELECT to_jsonb(d) FROM utilization_daily d`);
  });
});
