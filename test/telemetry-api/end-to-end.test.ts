import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '@gantry/config';
import { createOutbox } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import {
  createPublisher,
  destination,
  MachineScript,
  publishMessages,
  type LatLon,
  type MachineTruth,
} from '@gantry/simulator';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { countOf, startTestIngest, waitFor, type TestIngest } from '../support/ingest.ts';
import { createFleet, createOperator, type Fleet } from './fixtures.ts';

// The whole way through: a machine's morning published over MQTT, stored by the real
// ingest, derived and refreshed into gold by the worker's own code, read over HTTP.

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const YARD: LatLon = { lat: 53.5409, lon: 9.9707 };
/** Yesterday 07:00 UTC: history, so sessions are closed and no alert is raised. */
const START = Math.floor(Date.now() / DAY) * DAY - DAY + 7 * HOUR;
const YESTERDAY = new Date(START).toISOString().slice(0, 10);

let db: TestDatabase;
let api: TestApi;
let ingest: TestIngest;
let fleet: Fleet;
let truth: MachineTruth;
let published = 0;

beforeAll(async () => {
  db = await createTestDatabase('telemetry_e2e');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 01', 'Acme'],
    ['SC 02', 'Globex'],
  ]);
  await createOperator(db.pool, fleet.tenantId, 'OP-7', 'Gus Grant');
  const mqttUrl = inject('mqttUrl');
  ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl });

  const script = new MachineScript({
    deviceId: fleet.byName['SC 01']!.deviceId,
    start: START,
    position: YARD,
    gpsEveryS: 5,
    hourmeterEveryS: 60,
    heartbeatEveryS: 60,
  });
  const quay = destination(YARD, 600, 90);
  const stack = destination(quay, 400, 0);
  script
    .ignitionOn()
    .login('OP-7')
    .idle(300)
    .drive(quay, 14)
    .lift()
    .idle(30)
    .drive(stack, 9)
    .idle(60)
    .drop()
    .idle(200)
    .shock(3.1);
  script.drive(YARD, 12).idle(150).logout().idle(20).ignitionOff().idle(600);
  truth = script.truth();

  const publisher = await createPublisher({ mqttUrl, clientIdPrefix: 'telemetry-e2e' });
  published = await publishMessages(publisher, script.messages(), { qos: 1 });
  await publisher.close();
  await waitFor(
    () =>
      countOf(db.pool, `SELECT count(*) AS count FROM device_messages WHERE device_id = $1`, [
        fleet.byName['SC 01']!.deviceUuid,
      ]),
    (count) => count >= published,
    120_000,
    'ingest to store every published message',
  );

  const config = loadConfig({ GANTRY_DATABASE_URL: db.url, GANTRY_LOG_LEVEL: 'silent', GANTRY_LOG_FORMAT: 'json' });
  const derivation = { pool: db.pool, outbox: createOutbox({ maxAttempts: 3 }), logger: silentLogger(), config };
  for (let guard = 0; guard < 1000 && (await deriveDirtyDevices(derivation)).devices > 0; guard += 1);
  for (let guard = 0; guard < 1000; guard += 1) {
    const result = await refreshGold({ pool: db.pool, logger: silentLogger(), storageMode: db.mode });
    if (result.failed.length > 0) throw new Error(`gold refresh failed: ${result.failed.join(', ')}`);
    if (!result.more) break;
  }
}, 240_000);
afterAll(async () => {
  await ingest?.stop();
  await api?.close();
  await db?.drop();
});

async function get(path: string, key = fleet.tenantKey) {
  const response = await api.external(path, key);
  const body = await json(response);
  expect(response.status, `${path}: ${JSON.stringify(body).slice(0, 500)}`).toBe(200);
  return body;
}

const near = (actual: number, expected: number, slack = 0) =>
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(Math.max(1, Math.abs(expected) * 0.01) + slack);

describe('telemetry API over real ingest and derivation', () => {
  it('shows the device as just heard from, with the latest identifier and state', async () => {
    const body = await get('/telemetry/devices');
    const device = body.items.find((item: any) => item.assetName === 'SC 01');
    expect(device).toMatchObject({
      onlineStatus: 'online',
      lastIdentifier: 'OP-7',
      hourmeterValue: expect.any(Number),
    });
    expect(Date.parse(device.lastMessageAt)).toBe(truth.end);
    expect(body.items.find((item: any) => item.assetName === 'SC 02')).toMatchObject({ onlineStatus: 'unknown' });
  });

  it('lists the derived usage session with its operator, and the identifier session', async () => {
    const sessions = await get(`/telemetry/usage-sessions?from=${YESTERDAY}&to=${YESTERDAY}`);
    expect(sessions.items).toHaveLength(1);
    const [session] = sessions.items;
    const expected = truth.usageSessions[0]!;
    expect(session).toMatchObject({
      startReason: 'ignition_on',
      endReason: 'ignition_off',
      identifier: 'OP-7',
      operatorName: 'Gus Grant',
    });
    expect(Date.parse(session.startTs)).toBe(expected.start);
    // The script's ignition switches carry their own readings, so the session ends exactly there.
    expect(Date.parse(session.endTs)).toBe(expected.end);
    expect(session.containerWork.containerCycleCount).toBe(expected.containerCycles);
    near(session.distanceM, expected.distanceM);
    const identifiers = await get(`/telemetry/identifier-sessions?from=${YESTERDAY}&to=${YESTERDAY}&identifier=OP-7`);
    expect(
      identifiers.items.map((item: any) => [
        item.identifier,
        item.endReason,
        Date.parse(item.startTs),
        Date.parse(item.endTs),
      ]),
    ).toEqual(truth.identifierSessions.map((item) => [item.identifier, item.endReason, item.start, item.end]));
    expect((await get(`/telemetry/usage-sessions?from=${YESTERDAY}&to=${YESTERDAY}`, fleet.globexKey)).items).toEqual(
      [],
    );
  });

  it('answers utilization and container work from gold with the machine’s true figures', async () => {
    const day = await get(`/telemetry/utilization?from=${YESTERDAY}&to=${YESTERDAY}&bucket=day&groupBy=asset`);
    expect(day.source).toBe('gold');
    expect(day.aggregateRefresh.status).toBe('ok');
    expect(day.items).toHaveLength(1);
    const [item] = day.items;
    near(item.runningSeconds, truth.runningSeconds);
    near(item.stationaryRunningSeconds, truth.stationaryRunningSeconds);
    near(item.distanceM, truth.distanceM);
    expect(item.containerWork.containerCycleCount).toBe(truth.containerCycleCount);
    near(item.containerWork.loadedSeconds, truth.loadedSeconds);
    const work = await get(`/telemetry/container-work?from=${YESTERDAY}&to=${YESTERDAY}&bucket=day`, fleet.acmeKey);
    expect(work.items[0]).toMatchObject({ groupType: 'fleet', containerCycleCount: truth.containerCycleCount });
    const globex = await get(`/telemetry/container-work?from=${YESTERDAY}&to=${YESTERDAY}&bucket=day`, fleet.globexKey);
    expect(globex.items[0]).toMatchObject({ containerCycleCount: 0, loadedSeconds: 0 });
  });

  it('draws the route from the gold position buckets', async () => {
    const body = await get(
      `/telemetry/assets/${fleet.byName['SC 01']!.id}/positions?from=${new Date(START).toISOString()}&to=${new Date(START + 2 * HOUR).toISOString()}&limit=500`,
    );
    expect(body.source).toBe('gold');
    expect(body.resolution).toBe('1min');
    expect(body.items.length).toBeGreaterThan(5);
    expect(body.items.reduce((sum: number, item: any) => sum + item.pointCount, 0)).toBe(truth.validGpsFixes);
  });

  it('counts every published message in data quality', async () => {
    // Messages count by receive time (now), readings by device time (yesterday morning):
    // the range holds both, whatever the time of day (the default is the last 24 hours).
    const from = new Date(START - HOUR).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const body = await get(`/telemetry/data-quality?assetId=${fleet.byName['SC 01']!.id}&from=${from}&to=${to}`);
    const [entry] = body.assets;
    expect(entry).toMatchObject({
      messageCount: published,
      errorMessages: 0,
      parsedMessages: published,
      gpsEvents: truth.gpsFixes,
      validGpsEvents: truth.validGpsFixes,
    });
    expect(entry.imuEvents).toBe(truth.readings.imu);
  });
});
