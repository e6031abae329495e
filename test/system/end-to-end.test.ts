import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookEventTypes } from '@gantry/contracts';
import {
  badMessageCases,
  createPublisher,
  destination,
  publishMessages,
  type LatLon,
  type MachineTruth,
  type SimulatedMessage,
} from '@gantry/simulator';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { killAllServices, spawnService, type ServiceProcess } from '../support/processes.ts';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../support/webhook-receiver.ts';
import {
  addFigures,
  callJson,
  DAY,
  figuresOf,
  HOUR,
  ScriptedMachine,
  validSignature,
  waitUntil,
  zeroFigures,
  type Figures,
} from './support.ts';

// Gantry as one system: api, ingest and worker as their own processes (standalone entry
// points) on a fresh database and a broker of this file's own; everything provisioned
// over the admin API; a scripted day of three machines published over MQTT; a real
// webhook receiver that checks every signature itself. Every figure a user reads over
// HTTP is compared with the scripts' ground truth.

const ADMIN_TOKEN = `system-admin-${randomBytes(8).toString('hex')}`;
const RUN = randomBytes(3).toString('hex');
/** Yesterday 00:00 UTC: the scripted day lies in it, so its sessions are closed history. */
const DAY0 = Math.floor(Date.now() / DAY) * DAY - DAY;
const YESTERDAY = new Date(DAY0).toISOString().slice(0, 10);
const at = (hours: number, minutes = 0) => DAY0 + hours * HOUR + minutes * 60_000;
/** The hours of the scripted history (every machine is quiet outside them). */
const HISTORY_FROM = at(5);
const HISTORY_TO = at(19);

const YARD: LatLon = { lat: 53.5409, lon: 9.9707 };
const HOME = { a: destination(YARD, 120, 90), b: destination(YARD, 300, 200), c: destination(YARD, 200, 300) };
const QUAY_A = destination(HOME.a, 600, 90);
const STACK_A = destination(QUAY_A, 400, 180);
const QUAY_B = destination(HOME.b, 500, 120);
const STACK_B = destination(QUAY_B, 350, 250);
/** The forbidden zone lies 500 m north of RS 01's home; its history run passes through it. */
const ZONE_CENTRE = destination(HOME.c, 500, 0);
const BEYOND_ZONE = destination(ZONE_CENTRE, 300, 0);
const ZONE_HALF_M = 60;
const zoneBox = {
  minLat: ZONE_CENTRE.lat - ZONE_HALF_M / 111_320,
  maxLat: ZONE_CENTRE.lat + ZONE_HALF_M / 111_320,
  minLon: ZONE_CENTRE.lon - ZONE_HALF_M / (111_320 * Math.cos((ZONE_CENTRE.lat * Math.PI) / 180)),
  maxLon: ZONE_CENTRE.lon + ZONE_HALF_M / (111_320 * Math.cos((ZONE_CENTRE.lat * Math.PI) / 180)),
};
const inZone = (lat: number, lon: number) =>
  lat >= zoneBox.minLat && lat <= zoneBox.maxLat && lon >= zoneBox.minLon && lon <= zoneBox.maxLon;

let broker: TestBroker;
let db: TestDatabase;
let receiver: WebhookReceiver;
let api: ServiceProcess;

interface Provisioned {
  tenantId: string;
  tenantKey: string;
  acmeKey: string;
  acmeKeyName: string;
  secret: string;
  subscriptionId: string;
  assets: Record<
    'a' | 'b' | 'c' | 'spare',
    { id: string; name: string; identifier: string; customerName: string; deviceId: string | null }
  >;
  geofenceId: string;
  inspections: Array<{ id: string; assetKey: 'a' | 'b' | 'c'; status: string }>;
  reports: Array<{ id: string; inspectionId: string; impact: string; outcome: string }>;
  serviceRequests: Array<{ id: string; title: string; priority: string; customerName: string }>;
}
let p: Provisioned;

interface Day {
  machines: Record<'a' | 'b' | 'c', ScriptedMachine>;
  truth: Record<'a' | 'b' | 'c', MachineTruth>;
  /** Messages published per device id, bad ones included. */
  published: Map<string, number>;
  badMessages: Map<string, number>;
  /** RS 01's recent visit of the forbidden zone (device time). */
  zoneEntry: { ts: number; lat: number; lon: number };
  zoneExit: number;
  /** When RS 01's recent run began (today, a few minutes before publishing). */
  recentStart: number;
}
let day: Day;

async function admin(path: string, json?: unknown) {
  const response = await callJson(`${api.url}/api/admin/v1${path}`, {
    method: json === undefined ? 'GET' : 'POST',
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
    json,
  });
  if (response.status !== 201 && response.status !== 200)
    throw new Error(`admin ${path}: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

async function external(path: string, key: string, init: { method?: string; json?: unknown } = {}) {
  return callJson(`${api.url}/api/external/v1${path}`, { ...init, headers: { 'X-API-Key': key } });
}

/** A GET that must answer 200; the body. */
async function get(path: string, key = p.tenantKey) {
  const response = await external(path, key);
  expect(response.status, `${path}: ${JSON.stringify(response.body).slice(0, 500)}`).toBe(200);
  return response.body;
}

/**
 * Tolerance of test/telemetry-api/end-to-end.test.ts: 1 % of the truth, at least 1 unit.
 * No extra slack is needed: the scripts switch ignition through ScriptedMachine.on()/off()
 * (see test/system/support.ts), so sessions start and end exactly at the truth's times
 * (compared exactly); what remains is rounding — coordinates sent with 7 decimals,
 * hourmeter values in whole seconds, session seconds as integers. Counts are exact.
 */
const near = (actual: number, expected: number, what: string) =>
  expect(Math.abs(actual - expected), `${what}: ${actual} vs truth ${expected}`).toBeLessThanOrEqual(
    Math.max(1, Math.abs(expected) * 0.01),
  );

/** Percentages are rounded to 2 decimals: 1 % of the truth, at least 0.02 points. */
const nearPercent = (actual: number, expected: number, what: string) =>
  expect(Math.abs(actual - expected), `${what}: ${actual} vs truth ${expected}`).toBeLessThanOrEqual(
    Math.max(0.02, Math.abs(expected) * 0.01),
  );

async function provision(): Promise<Provisioned> {
  const tenant = await admin('/tenants', { name: 'System test terminal' });
  const t = `/tenants/${tenant.id}`;
  const tenantKey = await admin(`${t}/api-keys`, { name: 'Integration' });
  // The subscription exists before anything that raises an event is created.
  const subscription = await external('/webhooks/subscriptions', tenantKey.key, {
    method: 'POST',
    json: { url: receiver.url, events: webhookEventTypes, name: 'System receiver' },
  });
  expect(subscription.status).toBe(201);
  expect(subscription.body.secret).toMatch(/^whsec_/);
  const acmeKey = await admin(`${t}/api-keys`, { name: 'Acme portal', customerName: 'Acme' });

  await admin(`${t}/asset-types`, { name: 'Straddle carrier' });
  await admin(`${t}/asset-types`, { name: 'Reach stacker' });
  const asset = async (key: 'a' | 'b' | 'c' | 'spare', body: Record<string, unknown>, withDevice: boolean) => {
    const created = await admin(`${t}/assets`, body);
    let deviceId: string | null = null;
    if (withDevice) {
      deviceId = `sys-${RUN}-${key}`;
      await admin(`${t}/devices`, { deviceId, assetId: created.id, displayName: `${created.name} tracker` });
    }
    return [
      key,
      {
        id: created.id,
        name: created.name,
        identifier: created.identifier,
        customerName: created.customerName,
        deviceId,
      },
    ] as const;
  };
  const assets = Object.fromEntries([
    await asset(
      'a',
      { name: 'SC 01', identifier: 'SC-01', assetType: 'Straddle carrier', customerName: 'Acme', location: 'Quay 1' },
      true,
    ),
    await asset(
      'b',
      { name: 'SC 02', identifier: 'SC-02', assetType: 'Straddle carrier', customerName: 'Globex', location: 'Quay 2' },
      true,
    ),
    await asset(
      'c',
      { name: 'RS 01', identifier: 'RS-01', assetType: 'Reach stacker', customerName: 'Acme', location: 'Yard 3' },
      true,
    ),
    // No device: counted by reporting and data quality as an asset, not in the fleet.
    await asset(
      'spare',
      {
        name: 'RS 02',
        identifier: 'RS-02',
        assetType: 'Reach stacker',
        customerName: 'Globex',
        location: 'Workshop',
        lifecycleStatus: 'retired',
      },
      false,
    ),
  ]) as Provisioned['assets'];

  for (const [identifier, operatorName] of [
    ['OP-1', 'Gus Grant'],
    ['OP-2', 'Hana Ito'],
    ['OP-3', 'Lars Berg'],
    ['OP-5', 'Mia Roth'],
  ]) {
    await admin(`${t}/operators`, { identifier, operatorName });
  }
  const { minLat, maxLat, minLon, maxLon } = zoneBox;
  const geofence = await admin(`${t}/geofences`, {
    name: 'Reefer stack',
    type: 'forbidden',
    enabled: true,
    geometry: {
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
    },
  });

  const template = await admin(`${t}/templates`, { name: 'Daily check' });
  const inspection = async (assetKey: 'a' | 'b' | 'c', body: Record<string, unknown>) => {
    const created = await admin(`${t}/inspections`, { assetId: assets[assetKey].id, templateId: template.id, ...body });
    return { id: created.id as string, assetKey, status: created.status as string };
  };
  const inspections = [
    await inspection('a', {
      status: 'completed',
      startedAt: new Date(at(5, 10)).toISOString(),
      completedAt: new Date(at(5, 25)).toISOString(),
      inspectorName: 'Ines Ward',
    }),
    await inspection('b', {
      status: 'completed',
      startedAt: new Date(at(6, 0)).toISOString(),
      completedAt: new Date(at(6, 20)).toISOString(),
      inspectorName: 'Ines Ward',
    }),
    await inspection('c', {
      status: 'in_progress',
      startedAt: new Date(at(7, 30)).toISOString(),
      inspectorName: 'Ole Sand',
    }),
  ];
  const report = async (inspectionId: string, body: { impact: string; outcome: string; rejectionReason?: string }) => {
    const created = await admin(`${t}/reports`, {
      inspectionId,
      createdAt: new Date(at(6, 30)).toISOString(),
      ...body,
    });
    return {
      id: created.id as string,
      inspectionId,
      impact: created.impact as string,
      outcome: created.outcome as string,
    };
  };
  const reports = [
    await report(inspections[0]!.id, { impact: 'warning', outcome: 'completed' }),
    await report(inspections[1]!.id, {
      impact: 'out_of_service',
      outcome: 'rejected',
      rejectionReason: 'Hydraulic hose worn through',
    }),
  ];

  const serviceRequest = async (key: string, body: Record<string, unknown>) => {
    const created = await external('/service-requests', key, { method: 'POST', json: body });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return {
      id: created.body.id as string,
      title: created.body.title as string,
      priority: created.body.priority as string,
      customerName: created.body.customerName as string,
    };
  };
  const serviceRequests = [
    await serviceRequest(tenantKey.key, {
      title: 'Hydraulic leak at the spreader',
      category: 'defect',
      priority: 'urgent',
      assetId: assets.b.id,
      customerName: 'Globex',
    }),
    // A customer key files for its own customer without naming it.
    await serviceRequest(acmeKey.key, {
      title: 'Twistlock sticks',
      category: 'maintenance_request',
      priority: 'high',
      assetId: assets.a.id,
    }),
  ];
  return {
    tenantId: tenant.id,
    tenantKey: tenantKey.key,
    acmeKey: acmeKey.key,
    acmeKeyName: acmeKey.name,
    secret: subscription.body.secret,
    subscriptionId: subscription.body.id,
    assets,
    geofenceId: geofence.id,
    inspections,
    reports,
    serviceRequests,
  };
}

/**
 * The scripted day. History (yesterday): SC 01 works two shifts with three operators,
 * SC 02 a morning with invalid fixes and an afternoon without operator, RS 01 a run
 * through the forbidden zone (late history: moves the membership, raises no alert).
 * Today, minutes before publishing, RS 01 drives into the zone, waits and leaves.
 */
function scriptDay(now: number): Day {
  const options = { gpsEveryS: 5, hourmeterEveryS: 60, heartbeatEveryS: 60 };
  const a = new ScriptedMachine({ deviceId: p.assets.a.deviceId!, start: at(5, 30), position: HOME.a, ...options });
  a.idleUntil(at(6, 30)).on().login('OP-1').idle(120);
  a.shuttle(QUAY_A, STACK_A, HOME.a).shock(3.1).shuttle(QUAY_A, STACK_A, HOME.a).shuttle(QUAY_A, STACK_A, HOME.a);
  a.idle(900).logout().idle(30).off();
  a.idleUntil(at(9, 20)).on().login('OP-2').idle(60).shuttle(QUAY_A, STACK_A, HOME.a).shuttle(STACK_A, QUAY_A, HOME.a);
  a.login('OP-3').shuttle(QUAY_A, STACK_A, HOME.a).shock(2.7).idle(30).off();
  a.idleUntil(at(14, 50)).on().login('OP-1').shuttle(QUAY_A, STACK_A, HOME.a).logout().off().idleUntil(at(16));

  const b = new ScriptedMachine({ deviceId: p.assets.b.deviceId!, start: at(6, 30), position: HOME.b, ...options });
  b.idleUntil(at(7, 40)).on().login('OP-3').idle(90).badFix('no_fix').idle(20);
  b.shuttle(QUAY_B, STACK_B, HOME.b)
    .badFix('poor_hdop')
    .idle(10)
    .shuttle(QUAY_B, STACK_B, HOME.b)
    .shock(2.0)
    .shuttle(STACK_B, QUAY_B, HOME.b);
  b.logout().idle(60).off();
  b.idleUntil(at(12))
    .on()
    .idle(60)
    .shuttle(QUAY_B, STACK_B, HOME.b)
    .shock(2.9)
    .shuttle(QUAY_B, STACK_B, HOME.b)
    .off()
    .idleUntil(at(18, 30));

  const c = new ScriptedMachine({ deviceId: p.assets.c.deviceId!, start: at(8, 20), position: HOME.c, ...options });
  c.idleUntil(at(8, 50))
    .on()
    .login('OP-4')
    .idle(60)
    .drive(BEYOND_ZONE, 14)
    .lift()
    .idle(30)
    .drive(HOME.c, 10)
    .drop()
    .idle(60)
    .logout()
    .off()
    .idleUntil(at(10));

  // Today: minutes ago, so the zone entry is a recent transition (an alert opens for a transition < 15 min old).
  const recentStart = Math.floor(now / 1000) * 1000 - 10 * 60_000;
  c.silenceUntil(recentStart).unbound();
  c.on().login('OP-1').drive(ZONE_CENTRE, 10).idle(60).drive(HOME.c, 10).idle(20).logout().off().idle(60);
  if (c.now > now) throw new Error('the recent run of RS 01 ends in the future');

  const recentFixes = c.script
    .messages()
    .filter((message) => message.type === 'gps' && message.ts >= recentStart)
    .map((message) => ({ ...(message.payload as { lat: number; lon: number }), ts: message.ts }));
  const entryIndex = recentFixes.findIndex((fix) => inZone(fix.lat, fix.lon));
  const exitIndex = recentFixes.findIndex((fix, index) => index > entryIndex && !inZone(fix.lat, fix.lon));
  if (entryIndex < 0 || exitIndex < 0) throw new Error('the recent run of RS 01 does not enter and leave the zone');
  const historyInZone = c.script
    .messages()
    .some(
      (message) =>
        message.type === 'gps' &&
        message.ts < recentStart &&
        inZone((message.payload as any).lat, (message.payload as any).lon),
    );
  if (!historyInZone) throw new Error('the history run of RS 01 does not pass through the zone');
  const entry = recentFixes[entryIndex]!;

  const machines = { a, b, c };
  return {
    machines,
    truth: { a: a.truth(), b: b.truth(), c: c.truth() },
    published: new Map(),
    badMessages: new Map(),
    zoneEntry: { ts: entry.ts, lat: entry.lat, lon: entry.lon },
    zoneExit: recentFixes[exitIndex]!.ts,
    recentStart,
  };
}

beforeAll(async () => {
  [broker, db, receiver] = await Promise.all([
    startTestBroker(),
    createTestDatabase('system_e2e'),
    startWebhookReceiver(),
  ]);
  const common = { GANTRY_DATABASE_URL: db.url };
  [api] = await Promise.all([
    spawnService('api', {
      env: {
        ...common,
        GANTRY_ADMIN_TOKEN: ADMIN_TOKEN,
        GANTRY_MQTT_URL: broker.url,
        GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        GANTRY_RATE_LIMIT_PER_SECOND: '100000',
        GANTRY_RATE_LIMIT_BURST: '100000',
      },
    }),
    spawnService('ingest', {
      env: {
        ...common,
        GANTRY_MQTT_URL: broker.url,
        GANTRY_INGEST_CLIENT_ID: `system-e2e-${RUN}`,
        GANTRY_INGEST_SHARED_GROUP: `system-e2e-${RUN}`,
        GANTRY_INGEST_BATCH_MS: '50',
      },
    }),
    spawnService('worker', {
      env: {
        ...common,
        GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        GANTRY_WORKER_POLL_MS: '100',
        GANTRY_GOLD_REFRESH_MS: '500',
        GANTRY_WEBHOOK_BACKOFF_SECONDS: '1,1',
      },
    }),
  ]);

  p = await provision();
  day = scriptDay(Date.now());

  // Two messages of SC 02 ingest must keep in bronze as rejected and count as errors.
  const bad = badMessageCases(p.assets.b.deviceId!, Date.now())
    .filter((entry) => entry.reason === 'invalid_json' || entry.reason === 'value_out_of_range')
    .map((entry) => entry.message);
  const messages: SimulatedMessage[] = [
    ...day.machines.a.script.messages(),
    ...day.machines.b.script.messages(),
    ...day.machines.c.script.messages(),
    ...bad,
  ].sort((x, y) => x.ts - y.ts);
  for (const message of messages) day.published.set(message.deviceId, (day.published.get(message.deviceId) ?? 0) + 1);
  day.badMessages.set(p.assets.b.deviceId!, bad.length);
  const publisher = await createPublisher({ mqttUrl: broker.url, clientIdPrefix: `system-e2e-${RUN}` });
  await publishMessages(publisher, messages, { qos: 1 });
  await publisher.close();

  // Stored, derived and refreshed: every message in bronze, the derivation queue empty,
  // no gold invalidation left. Hang guards only; the figures are asserted below.
  await waitUntil(
    'ingest to store every message',
    async () => Number((await db.pool.query('SELECT count(*) FROM device_messages')).rows[0].count),
    (count) => count >= messages.length,
  );
  await waitUntil(
    'derivation and gold to catch up',
    async () =>
      (
        await db.pool.query(
          `SELECT (SELECT count(*) FROM derivation_queue) + (SELECT count(*) FROM gold_invalidations WHERE relation LIKE 'utilization%') AS n`,
        )
      ).rows[0].n,
    (left) => Number(left) === 0,
  );
}, 240_000);

afterAll(async () => {
  await killAllServices();
  await receiver?.close();
  await broker?.stop();
  await db?.drop();
});

const assetKeys = ['a', 'b', 'c'] as const;
type AssetKey = (typeof assetKeys)[number];
const keyOfAssetId = (id: string) =>
  (Object.entries(p.assets).find(([, asset]) => asset.id === id)?.[0] ?? null) as AssetKey | null;
const isoNow = (offsetMs = 0) => new Date(Date.now() + offsetMs).toISOString();
const wholeRange = () => `from=${new Date(DAY0).toISOString()}&to=${isoNow(HOUR)}`;

function expectUtilization(item: any, truth: Figures, capacitySeconds: number, what: string) {
  near(item.runningSeconds, truth.runningSeconds, `${what} runningSeconds`);
  near(item.stationaryRunningSeconds, truth.stationaryRunningSeconds, `${what} stationaryRunningSeconds`);
  near(item.distanceM, truth.distanceM, `${what} distanceM`);
  nearPercent(item.utilizationPercent, (truth.runningSeconds / capacitySeconds) * 100, `${what} utilizationPercent`);
  expect(item.containerWork.containerCycleCount, `${what} containerCycleCount`).toBe(truth.containerCycleCount);
  near(item.containerWork.loadedSeconds, truth.loadedSeconds, `${what} loadedSeconds`);
  near(item.containerWork.emptySeconds, truth.emptySeconds, `${what} emptySeconds`);
  near(item.containerWork.loadedDistanceM, truth.loadedDistanceM, `${what} loadedDistanceM`);
  near(item.containerWork.emptyDistanceM, truth.emptyDistanceM, `${what} emptyDistanceM`);
}

/** Waits until the answer comes from gold (the worker refreshes every 500 ms), then returns it. */
function fromGold(path: string, key = p.tenantKey) {
  return waitUntil(
    `${path} from gold`,
    () => get(path, key),
    (body) => body.source === 'gold' && body.aggregateRefresh.status === 'ok',
  );
}

describe('a scripted day through MQTT, ingest, worker and API processes', () => {
  it('answers hourly utilization per asset and for the fleet from gold with the scripts’ figures', async () => {
    const range = `from=${new Date(HISTORY_FROM).toISOString()}&to=${new Date(HISTORY_TO).toISOString()}`;
    const perAsset = await fromGold(`/telemetry/utilization?${range}&bucket=hour&groupBy=asset&limit=500`);
    const hourly = Object.fromEntries(
      assetKeys.map((key) => [key, day.machines[key].hourly(HISTORY_FROM, HISTORY_TO)]),
    ) as Record<AssetKey, Map<number, Figures>>;
    for (const key of assetKeys) {
      const rows = new Map<number, any>(
        perAsset.items
          .filter((item: any) => item.asset.id === p.assets[key].id)
          .map((item: any) => [Date.parse(item.bucketStart), item]),
      );
      const hours = new Set([...rows.keys(), ...hourly[key].keys()]);
      // Every machine works across at least one hour boundary.
      expect([...hourly[key].values()].filter((hour) => hour.runningSeconds > 0).length).toBeGreaterThanOrEqual(2);
      for (const hour of hours) {
        const row = rows.get(hour) ?? {
          runningSeconds: 0,
          stationaryRunningSeconds: 0,
          distanceM: 0,
          utilizationPercent: 0,
          containerWork: {
            containerCycleCount: 0,
            loadedSeconds: 0,
            emptySeconds: 0,
            loadedDistanceM: 0,
            emptyDistanceM: 0,
          },
        };
        expectUtilization(
          row,
          hourly[key].get(hour) ?? zeroFigures(),
          3600,
          `${p.assets[key].name} ${new Date(hour).toISOString()}`,
        );
      }
    }

    const fleet = await fromGold(`/telemetry/utilization?${range}&bucket=hour&groupBy=fleet&limit=500`);
    // Every hour of the range is listed, zeros included; the fleet is the three assets with a device.
    expect(fleet.items).toHaveLength((HISTORY_TO - HISTORY_FROM) / HOUR);
    for (const item of fleet.items) {
      const hour = Date.parse(item.bucketStart);
      const truth = assetKeys.reduce(
        (sum, key) => addFigures(sum, hourly[key].get(hour) ?? zeroFigures()),
        zeroFigures(),
      );
      expect(item).toMatchObject({ groupType: 'fleet', asset: null });
      expectUtilization(item, truth, 3600 * 3, `fleet ${item.bucketStart}`);
    }
  });

  it('answers daily utilization and container work per asset and for the fleet with the whole day’s truth', async () => {
    const range = `from=${YESTERDAY}&to=${isoNow().slice(0, 10)}`;
    const perAsset = await fromGold(`/telemetry/utilization?${range}&bucket=day&groupBy=asset`);
    const yesterday = (key: AssetKey) =>
      perAsset.items.find((item: any) => item.asset.id === p.assets[key].id && item.bucketStart.startsWith(YESTERDAY));
    // SC 01 and SC 02 worked yesterday only; RS 01 also today (its recent run, which falls
    // into yesterday only when this runs in the first minutes after midnight UTC).
    for (const key of ['a', 'b'] as const) {
      const truth = day.truth[key];
      expectUtilization(yesterday(key), figuresOf(truth), 86_400, `${p.assets[key].name} ${YESTERDAY}`);
      near(yesterday(key).hourmeterDelta, truth.hourmeterDelta, `${p.assets[key].name} hourmeterDelta`);
    }
    const total = (key: AssetKey) =>
      perAsset.items
        .filter((item: any) => item.asset.id === p.assets[key].id)
        .reduce(
          (sum: any, item: any) => ({
            runningSeconds: sum.runningSeconds + item.runningSeconds,
            distanceM: sum.distanceM + item.distanceM,
            containerCycleCount: sum.containerCycleCount + item.containerWork.containerCycleCount,
            hourmeterDelta: sum.hourmeterDelta + item.hourmeterDelta,
          }),
          { runningSeconds: 0, distanceM: 0, containerCycleCount: 0, hourmeterDelta: 0 },
        );
    for (const key of assetKeys) {
      const truth = day.truth[key];
      near(total(key).runningSeconds, truth.runningSeconds, `${p.assets[key].name} running over the range`);
      near(total(key).distanceM, truth.distanceM, `${p.assets[key].name} distance over the range`);
      near(total(key).hourmeterDelta, truth.hourmeterDelta, `${p.assets[key].name} hourmeter over the range`);
      expect(total(key).containerCycleCount).toBe(truth.containerCycleCount);
    }

    const fleet = await fromGold(`/telemetry/container-work?${range}&bucket=day&groupBy=fleet`);
    const fleetTruth = assetKeys.reduce((sum, key) => addFigures(sum, figuresOf(day.truth[key])), zeroFigures());
    const sum = (field: string) => fleet.items.reduce((total: number, item: any) => total + item[field], 0);
    expect(sum('containerCycleCount')).toBe(fleetTruth.containerCycleCount);
    near(sum('loadedSeconds'), fleetTruth.loadedSeconds, 'fleet loadedSeconds');
    near(sum('emptySeconds'), fleetTruth.emptySeconds, 'fleet emptySeconds');
    near(sum('loadedDistanceM'), fleetTruth.loadedDistanceM, 'fleet loadedDistanceM');
    near(sum('emptyDistanceM'), fleetTruth.emptyDistanceM, 'fleet emptyDistanceM');
    const yesterdayFleet = fleet.items.find((item: any) => item.bucketStart.startsWith(YESTERDAY));
    nearPercent(
      yesterdayFleet.loadedPercent,
      (yesterdayFleet.loadedSeconds / (yesterdayFleet.loadedSeconds + yesterdayFleet.emptySeconds)) * 100,
      'fleet loadedPercent',
    );
  });

  it('lists every usage and identifier session of the scripts, with operators and figures', async () => {
    const usage = await get(`/telemetry/usage-sessions?${wholeRange()}&limit=500`);
    const identifier = await get(`/telemetry/identifier-sessions?${wholeRange()}&limit=500`);
    const operatorNames: Record<string, string> = { 'OP-1': 'Gus Grant', 'OP-2': 'Hana Ito', 'OP-3': 'Lars Berg' };
    for (const key of assetKeys) {
      const machine = day.machines[key];
      const truth = day.truth[key];
      const sessions = usage.items
        .filter((item: any) => item.assetId === p.assets[key].id)
        .sort((x: any, y: any) => Date.parse(x.startTs) - Date.parse(y.startTs));
      expect(
        sessions.map((item: any) => [
          item.startReason,
          item.endReason,
          Date.parse(item.startTs),
          Date.parse(item.endTs),
        ]),
      ).toEqual(truth.usageSessions.map((session) => ['ignition_on', session.endReason, session.start, session.end]));
      for (const [index, session] of sessions.entries()) {
        const expected = truth.usageSessions[index]!;
        const figures = machine.figuresBetween(expected.start, expected.end!);
        const firstLogin = truth.identifierSessions.find(
          (entry) => entry.start >= expected.start && entry.start <= expected.end!,
        );
        const what = `${p.assets[key].name} session ${new Date(expected.start).toISOString()}`;
        expect(session.identifier, what).toBe(firstLogin?.identifier ?? '');
        expect(session.operatorName, what).toBe(operatorNames[firstLogin?.identifier ?? ''] ?? '');
        expect(session.confidence).toBe(1);
        near(session.durationSeconds, (expected.end! - expected.start) / 1000, `${what} durationSeconds`);
        near(session.distanceM, expected.distanceM, `${what} distanceM`);
        near(session.movingSeconds, figures.movingSeconds, `${what} movingSeconds`);
        near(session.stationaryRunningSeconds, figures.stationaryRunningSeconds, `${what} stationaryRunningSeconds`);
        expect(session.containerWork.containerCycleCount, what).toBe(expected.containerCycles);
        expect(session.imuAnomalyCount, what).toBe(figures.imuAnomalyCount);
      }

      const mine = identifier.items
        .filter((item: any) => item.assetId === p.assets[key].id)
        .sort((x: any, y: any) => Date.parse(x.startTs) - Date.parse(y.startTs));
      expect(
        mine.map((item: any) => [
          item.identifier,
          item.operatorName,
          item.endReason,
          Date.parse(item.startTs),
          Date.parse(item.endTs),
        ]),
      ).toEqual(
        truth.identifierSessions.map((entry) => [
          entry.identifier,
          operatorNames[entry.identifier] ?? '',
          entry.endReason,
          entry.start,
          entry.end,
        ]),
      );
      for (const [index, session] of mine.entries()) {
        const expected = truth.identifierSessions[index]!;
        const figures = machine.figuresBetween(expected.start, expected.end!);
        near(session.distanceM, figures.distanceM, `${expected.identifier} on ${p.assets[key].name} distanceM`);
        expect(session.containerWork.containerCycleCount).toBe(figures.containerCycleCount);
      }
    }
    // Nothing beyond the scripts' sessions (the spare asset has no device).
    expect(usage.items).toHaveLength(assetKeys.reduce((sum, key) => sum + day.truth[key].usageSessions.length, 0));
    expect(identifier.items).toHaveLength(
      assetKeys.reduce((sum, key) => sum + day.truth[key].identifierSessions.length, 0),
    );
  });

  it('sums operators over their identifier sessions, registered ones without work included for the tenant', async () => {
    const expectedFor = (keys: readonly AssetKey[]) => {
      const totals = new Map<
        string,
        { sessionCount: number; durationSeconds: number; distanceM: number; lastSeenAt: number }
      >();
      for (const key of keys) {
        for (const entry of day.truth[key].identifierSessions) {
          const total = totals.get(entry.identifier) ?? {
            sessionCount: 0,
            durationSeconds: 0,
            distanceM: 0,
            lastSeenAt: 0,
          };
          total.sessionCount += 1;
          total.durationSeconds += (entry.end! - entry.start) / 1000;
          total.distanceM += day.machines[key].figuresBetween(entry.start, entry.end!).distanceM;
          total.lastSeenAt = Math.max(total.lastSeenAt, entry.end!);
          totals.set(entry.identifier, total);
        }
      }
      return totals;
    };
    const check = (items: any[], expected: ReturnType<typeof expectedFor>) => {
      for (const [identifier, total] of expected) {
        const item = items.find((entry) => entry.identifier === identifier);
        expect(item, identifier).toBeDefined();
        expect(item.sessionCount, identifier).toBe(total.sessionCount);
        near(item.durationSeconds, total.durationSeconds, `${identifier} durationSeconds`);
        near(item.distanceM, total.distanceM, `${identifier} distanceM`);
        expect(Date.parse(item.lastSeenAt), identifier).toBe(total.lastSeenAt);
      }
    };
    const tenant = await get(`/telemetry/operators?${wholeRange()}`);
    const tenantExpected = expectedFor(assetKeys);
    check(tenant.items, tenantExpected);
    expect(tenant.items.find((item: any) => item.identifier === 'OP-4')).toMatchObject({ operatorName: '' });
    expect(tenant.items.find((item: any) => item.identifier === 'OP-5')).toMatchObject({
      operatorName: 'Mia Roth',
      sessionCount: 0,
      durationSeconds: 0,
      lastSeenAt: null,
    });
    expect(tenant.items).toHaveLength(tenantExpected.size + 1);

    // Acme's key counts only the work on SC 01 and RS 01 (OP-3 also drove Globex's SC 02).
    const acme = await get(`/telemetry/operators?${wholeRange()}`, p.acmeKey);
    const acmeExpected = expectedFor(['a', 'c']);
    check(acme.items, acmeExpected);
    expect(acme.items.map((item: any) => item.identifier).sort()).toEqual([...acmeExpected.keys()].sort());
  });

  it('opened, resolved and on request acknowledged the alert of the recent zone visit only', async () => {
    await receiver.waitFor(
      'the alert opened and resolved',
      (requests) => eventsOf(requests, 'telemetry.geofence_alert.resolved').length > 0,
      30_000,
    );
    const alerts = await get(`/telemetry/geofence-alerts?${wholeRange()}`);
    // The history run through the zone raised nothing: one alert, the recent visit's.
    expect(alerts.items).toHaveLength(1);
    const [alert] = alerts.items;
    expect(alert).toMatchObject({
      geofenceId: p.geofenceId,
      geofenceName: 'Reefer stack',
      assetId: p.assets.c.id,
      alertType: 'forbidden_enter',
      status: 'open',
      isActive: false,
      acknowledgedAt: null,
    });
    expect(Date.parse(alert.createdAt)).toBe(day.zoneEntry.ts);
    expect(Date.parse(alert.resolvedAt)).toBe(day.zoneExit);

    // Acme's key sees RS 01's alert and acknowledges it; a second acknowledgement changes nothing.
    const first = await external(`/telemetry/geofence-alerts/${alert.id}/acknowledge`, p.acmeKey, { method: 'POST' });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ id: alert.id, status: 'acknowledged', isActive: false });
    const again = await external(`/telemetry/geofence-alerts/${alert.id}/acknowledge`, p.acmeKey, { method: 'POST' });
    expect(again.body.acknowledgedAt).toBe(first.body.acknowledgedAt);
    expect(
      (await get(`/telemetry/geofence-alerts?${wholeRange()}`, p.acmeKey)).items.map((item: any) => item.status),
    ).toEqual(['acknowledged']);

    const zones = await get('/telemetry/geofences');
    expect(zones.items).toEqual([
      expect.objectContaining({ id: p.geofenceId, type: 'forbidden', activeAlertCount: 0 }),
    ]);
    const state = await get(`/telemetry/assets/${p.assets.c.id}/state`, p.acmeKey);
    expect(state.state).toMatchObject({ geofences: [], activeAlertCount: 0 });
  });

  it('counts every message, reading and error in data quality, per device and in the summary', async () => {
    const body = await get(`/telemetry/data-quality?${wholeRange()}`);
    expect(body.assets).toHaveLength(3);
    for (const key of assetKeys) {
      const truth = day.truth[key];
      const deviceId = p.assets[key].deviceId!;
      const entry = body.assets.find((item: any) => item.deviceId === deviceId);
      const published = day.published.get(deviceId)!;
      const errors = day.badMessages.get(deviceId) ?? 0;
      const readings = Object.values(truth.readings).reduce((sum, count) => sum + count, 0);
      expect(entry, deviceId).toMatchObject({
        assetId: p.assets[key].id,
        messageCount: published,
        errorMessages: errors,
        parsedMessages: published - errors,
        silverEvents: readings,
        gpsEvents: truth.readings.gps,
        validGpsEvents: truth.validGpsFixes,
        adcinEvents: truth.readings.adcin,
        heartbeatEvents: truth.readings.heartbeat,
        hourmeterEvents: truth.readings.hourmeter,
        imuEvents: truth.readings.imu,
        // A day of history arrives at once: most messages came more than 5 minutes late.
        status: 'delayed',
      });
    }
    expect(day.truth.b.validGpsFixes).toBe(day.truth.b.gpsFixes - 2);
    const total = (field: string) => body.assets.reduce((sum: number, item: any) => sum + item[field], 0);
    expect(body.summary).toMatchObject({
      totalAssets: 4,
      telemetryAssets: 3,
      assetsWithData: 3,
      delayedAssets: 3,
      errorMessages: 2,
      messageCount: total('messageCount'),
      silverEvents: total('silverEvents'),
      coveragePercent: 100,
      qualityScore: 80,
      recentErrorCount: 2,
    });
    expect(body.recentErrors.map((error: any) => [error.deviceId, error.ingestError.split(':')[0]]).sort()).toEqual(
      [
        [p.assets.b.deviceId, 'invalid_json'],
        [p.assets.b.deviceId, 'value_out_of_range'],
      ].sort(),
    );

    const acme = await get(`/telemetry/data-quality?${wholeRange()}`, p.acmeKey);
    expect(acme.assets.map((item: any) => item.deviceId).sort()).toEqual(
      [p.assets.a.deviceId, p.assets.c.deviceId].sort(),
    );
    expect(acme.summary).toMatchObject({
      totalAssets: 2,
      telemetryAssets: 2,
      errorMessages: 0,
      messageCount: day.published.get(p.assets.a.deviceId!)! + day.published.get(p.assets.c.deviceId!)!,
    });
  });

  it('counts the provisioned inspections, reports and service requests in the overview, per scope', async () => {
    const tenant = await get('/reporting/overview');
    expect(tenant.summary).toMatchObject({
      assets: 4,
      activeAssets: 3,
      inactiveAssets: 1,
      inspections: 3,
      completedInspections: 2,
      rejectedInspections: 1,
      reports: 2,
      warningReports: 1,
      outOfServiceReports: 1,
      rejectedReports: 1,
      serviceRequests: 2,
      openServiceRequests: 2,
      urgentServiceRequests: 1,
      cancelledServiceRequests: 0,
      serviceCancellationRate: 0,
    });
    expect(tenant.breakdowns.customer).toEqual([
      { label: 'Acme', count: 2 },
      { label: 'Globex', count: 2 },
    ]);
    expect(tenant.breakdowns.inspectionStatus).toEqual([
      { label: 'completed', count: 2 },
      { label: 'in_progress', count: 1 },
    ]);
    expect(tenant.recentServiceRequests.map((request: any) => request.id).sort()).toEqual(
      p.serviceRequests.map((request) => request.id).sort(),
    );

    const acme = await get('/reporting/overview', p.acmeKey);
    expect(acme.summary).toMatchObject({
      assets: 2,
      activeAssets: 2,
      inspections: 2,
      completedInspections: 1,
      rejectedInspections: 0,
      reports: 1,
      warningReports: 1,
      outOfServiceReports: 0,
      serviceRequests: 1,
      openServiceRequests: 1,
      urgentServiceRequests: 0,
    });
    expect(acme.recentReports.map((report: any) => report.reportId)).toEqual([p.reports[0]!.id]);
  });

  it('keeps a customer key to its customer’s figures', async () => {
    const devices = await get('/telemetry/devices', p.acmeKey);
    expect(devices.items.map((item: any) => item.assetName).sort()).toEqual(['RS 01', 'SC 01']);
    const sessions = await get(`/telemetry/usage-sessions?${wholeRange()}&limit=500`, p.acmeKey);
    expect(new Set(sessions.items.map((item: any) => keyOfAssetId(item.assetId)))).toEqual(new Set(['a', 'c']));
    const hidden = await external(`/telemetry/usage-sessions?${wholeRange()}&assetId=${p.assets.b.id}`, p.acmeKey);
    expect(hidden.status).toBe(404);

    const range = `from=${YESTERDAY}&to=${isoNow().slice(0, 10)}`;
    const fleet = await fromGold(`/telemetry/utilization?${range}&bucket=day&groupBy=fleet`, p.acmeKey);
    const running = fleet.items.reduce((sum: number, item: any) => sum + item.runningSeconds, 0);
    near(running, day.truth.a.runningSeconds + day.truth.c.runningSeconds, 'Acme fleet runningSeconds');
    const yesterday = fleet.items.find((item: any) => item.bucketStart.startsWith(YESTERDAY));
    // The fleet of a customer key is its own two assets with a device.
    nearPercent(
      yesterday.utilizationPercent,
      (yesterday.runningSeconds / (86_400 * 2)) * 100,
      'Acme fleet utilizationPercent',
    );
  });

  it('delivered each expected event once, signed with the subscription’s secret, with the spec’s payload', async () => {
    const alertId = (await get(`/telemetry/geofence-alerts?${wholeRange()}`)).items[0].id as string;
    const expected = [
      ...p.inspections
        .filter((inspection) => inspection.status === 'completed')
        .map((inspection) => ['inspection.completed', inspection.id]),
      ...p.reports.map((report) => ['report.created', report.id]),
      ...p.serviceRequests.map((request) => ['service_request.created', request.id]),
      ['telemetry.geofence_alert.opened', alertId],
      ['telemetry.geofence_alert.resolved', alertId],
      ['telemetry.geofence_alert.acknowledged', alertId],
    ].sort();
    const deliveryIds = (requests: ReceivedWebhook[]) =>
      new Set(requests.map((request) => request.headers['x-service-webhook-id']));
    await receiver.waitFor(
      'every expected delivery',
      (requests) => deliveryIds(requests).size >= expected.length,
      30_000,
    );

    // The log has exactly these deliveries (the second acknowledgement queued nothing), all delivered.
    const log = await get('/webhooks/deliveries?limit=500');
    expect(log.items.map((item: any) => [item.eventType, item.entityId]).sort()).toEqual(expected);
    for (const item of log.items)
      expect(item).toMatchObject({ status: 'delivered', webhookId: p.subscriptionId, httpStatus: 200, error: '' });

    // Each delivery id reached the receiver; a retry would repeat the same id and bytes (at-least-once).
    const byId = new Map<string, ReceivedWebhook[]>();
    for (const request of receiver.requests) {
      const id = String(request.headers['x-service-webhook-id']);
      byId.set(id, [...(byId.get(id) ?? []), request]);
    }
    expect(new Set(byId.keys())).toEqual(new Set(log.items.map((item: any) => item.id)));
    for (const [id, requests] of byId)
      for (const request of requests) expect(request.body.equals(requests[0]!.body), id).toBe(true);
    const received = [...byId.values()].map((requests) => requests[0]!);
    expect(received.map((request) => [request.json.event, request.json.entityId]).sort()).toEqual(expected);

    for (const request of received) {
      expect(request.method).toBe('POST');
      expect(request.headers['content-type']).toMatch(/^application\/json/);
      expect(
        validSignature(request.body, request.headers['x-service-signature'], p.secret),
        `signature of ${request.json.event}`,
      ).toBe(true);
      expect(validSignature(request.body, request.headers['x-service-signature'], `${p.secret}x`)).toBe(false);
      expect(Number(request.headers['x-service-webhook-attempt'])).toBeGreaterThanOrEqual(1);
      expect(Number.isNaN(Date.parse(String(request.headers['x-service-webhook-timestamp'])))).toBe(false);
      expect(Object.keys(request.json)).toEqual(['event', 'entityType', 'entityId', 'tenantId', 'createdAt', 'data']);
      expect(request.json.tenantId).toBe(p.tenantId);
      expect(Number.isNaN(Date.parse(request.json.createdAt))).toBe(false);
      expect(request.json.data.id).toBe(request.json.entityId);
    }

    const one = (event: string) =>
      received.filter((request) => request.json.event === event).map((request) => request.json);
    for (const body of one('inspection.completed')) {
      const inspection = p.inspections.find((entry) => entry.id === body.entityId)!;
      expect(body).toMatchObject({
        entityType: 'inspection',
        data: {
          status: 'completed',
          assetId: p.assets[inspection.assetKey].id,
          customerName: p.assets[inspection.assetKey].customerName,
        },
      });
    }
    for (const body of one('report.created')) {
      const report = p.reports.find((entry) => entry.id === body.entityId)!;
      expect(body).toMatchObject({
        entityType: 'report',
        data: { inspectionId: report.inspectionId, impact: report.impact, outcome: report.outcome },
      });
    }
    for (const body of one('service_request.created')) {
      const request = p.serviceRequests.find((entry) => entry.id === body.entityId)!;
      // The spec's minimum for this event: id, title, status, priority, customerName.
      expect(body).toMatchObject({
        entityType: 'service_request',
        data: {
          id: request.id,
          title: request.title,
          status: 'new',
          priority: request.priority,
          customerName: request.customerName,
        },
      });
    }
    const alertData = {
      id: alertId,
      geofenceId: p.geofenceId,
      geofenceName: 'Reefer stack',
      assetId: p.assets.c.id,
      asset: {
        id: p.assets.c.id,
        identifier: 'RS-01',
        name: 'RS 01',
        assetType: 'Reach stacker',
        location: 'Yard 3',
        customerName: 'Acme',
      },
      alertType: 'forbidden_enter',
      createdAt: new Date(day.zoneEntry.ts).toISOString(),
      latitude: day.zoneEntry.lat,
      longitude: day.zoneEntry.lon,
    };
    const [opened] = one('telemetry.geofence_alert.opened');
    expect(opened).toMatchObject({
      entityType: 'geofence_alert',
      data: { ...alertData, status: 'open', isActive: true, acknowledgedAt: null, resolvedAt: null },
    });
    const [resolved] = one('telemetry.geofence_alert.resolved');
    expect(resolved).toMatchObject({
      entityType: 'geofence_alert',
      data: {
        ...alertData,
        status: 'open',
        isActive: false,
        acknowledgedAt: null,
        resolvedAt: new Date(day.zoneExit).toISOString(),
      },
    });
    const [acknowledged] = one('telemetry.geofence_alert.acknowledged');
    expect(acknowledged).toMatchObject({
      entityType: 'geofence_alert',
      data: {
        ...alertData,
        status: 'acknowledged',
        isActive: false,
        resolvedAt: new Date(day.zoneExit).toISOString(),
        acknowledgedBy: p.acmeKeyName,
      },
    });
    expect(Number.isNaN(Date.parse(acknowledged.data.acknowledgedAt))).toBe(false);
  });
});

function eventsOf(requests: ReceivedWebhook[], event: string) {
  return requests.filter((request) => request.json?.event === event);
}
