import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@gantry/logger';
import {
  startDemoFleetFromDatabase,
  type DemoFleetStart,
  type DemoKeys,
} from '../../services/cli/src/commands/demo.ts';
import { json, type TestApi } from '../support/api.ts';
import type { TestBroker } from '../support/broker.ts';
import { startDemoStack, type DemoStack } from '../support/demo.ts';
import type { TestDatabase } from '../support/database.ts';

// What `gantry start` does for the demo, minus the embedded PostgreSQL and broker: the
// demo provisioning (ensureDemo), ingest, the worker, the API (every answer checked
// against its schema) and the demo fleet (startDemoFleetFromDatabase) on a fresh
// database. Each endpoint must then show the demo's data: the uploaded history, the live
// fleet and the provisioned service requests. The waits are hang guards, not timings.

/** Generous: the demo promises a minute; a shared two-core machine may take longer. */
const GUARD_MS = 240_000;
/** Each test may wait for the whole guard. */
const TEST_TIMEOUT_MS = GUARD_MS + 60_000;

let db: TestDatabase;
let broker: TestBroker;
let stack: DemoStack | undefined;
let api: TestApi;
let keys: DemoKeys;
let started: DemoFleetStart | null = null;
let liveFrom = 0;

beforeAll(async () => {
  stack = await startDemoStack('demo');
  ({ db, broker, api, keys } = stack);
  liveFrom = Date.now();
  started = await startDemoFleetFromDatabase(db.pool, { mqttUrl: broker.url, logger: silentLogger() });
}, 120_000);

afterAll(async () => {
  await started?.fleet.stop();
  await stack?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function get(path: string, key = keys.tenantKey): Promise<any> {
  const response = await api.external(path, key);
  const body = await json(response);
  expect(response.status, `${path}: ${JSON.stringify(body).slice(0, 300)}`).toBe(200);
  return body;
}

/**
 * Polls an endpoint until `done` accepts its body and returns that body; after the guard
 * it throws with the last body (or what `show` picks of it).
 */
async function until(
  path: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  done: (body: any) => boolean,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  show: (body: any) => unknown = (body) => body,
  key = keys.tenantKey,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<any> {
  const deadline = liveFrom + GUARD_MS;
  for (;;) {
    const body = await get(path, key);
    if (done(body)) return body;
    if (Date.now() > deadline)
      throw new Error(`${path} never showed the demo data; last answer: ${JSON.stringify(show(body)).slice(0, 3000)}`);
    await sleep(1000);
  }
}

const endReasons = (body: { items: Array<{ endReason: string }> }) => body.items.map((item) => item.endReason);

const sum = (items: Array<Record<string, number>>, field: string) =>
  items.reduce((total, item) => total + (item[field] ?? 0), 0);

describe('the demo on a fresh database', () => {
  it(
    'starts the whole fleet, uploading its recent past first',
    async () => {
      expect(keys.created).toBe(true);
      expect(started).toMatchObject({ devices: 20, history: true, historyHours: 10 });
      const { historyReadings, historyMessages } = await started!.fleet.ready;
      expect(historyReadings).toBeGreaterThan(20 * 10 * 300);
      expect(historyMessages).toBeGreaterThan(0);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'lists every device online with its operator, and the asset state, positions and capabilities',
    async () => {
      const devices = await until('/telemetry/devices', (body) =>
        body.items.every((item: { lastIdentifier: string }) => item.lastIdentifier !== ''),
      );
      expect(devices.items).toHaveLength(20);
      expect(devices.items.every((item: { onlineStatus: string }) => item.onlineStatus === 'online')).toBe(true);

      const sc01 = devices.items.find((item: { deviceId: string }) => item.deviceId === 'demo-sc-01');
      const state = await get(`/telemetry/assets/${sc01.assetId}/state`);
      expect(state.state).toMatchObject({
        telemetry: true,
        onlineStatus: 'online',
        identifier: expect.stringMatching(/^OP-0\d\d$/),
        operatorName: expect.any(String),
      });
      expect(state.state.operatorName).not.toBe('');
      expect(state.state.position).toMatchObject({ gpsValid: true });

      const positions = await until(
        `/telemetry/assets/${sc01.assetId}/positions?limit=500`,
        (body) => body.items.length >= 300,
      );
      expect(positions.resolution).toBe('1min');

      // Positions are in gold as soon as their fixes are stored (PostgreSQL mode), before the
      // uploaded history is all in: the counts are waited for on their own.
      const capabilities = await until(
        '/telemetry/capabilities',
        (body) => body.messageTypesLast7d.gps > 20 * 3000,
        (body) => body.messageTypesLast7d,
      );
      expect(capabilities).toMatchObject({
        telemetryAssets: 20,
        gpsEnabled: true,
        identifierEnabled: true,
        geofenceAlertsEnabled: true,
      });
      expect(capabilities.messageTypesLast7d.gps).toBeGreaterThan(20 * 3000);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'has hours of closed usage and operator sessions and an open one per machine',
    async () => {
      // History and live are derived once every machine has an open session besides its closed ones.
      const usage = await until(
        '/telemetry/usage-sessions?limit=500',
        (body) =>
          endReasons(body).filter((reason) => reason === 'ongoing').length >= 20 && endReasons(body).length >= 60,
        endReasons,
      );
      expect(new Set(usage.items.map((item: { endReason: string }) => item.endReason))).toEqual(
        new Set(['ignition_off', 'timeout', 'ongoing']),
      );
      expect(usage.items.every((item: { operatorName: string }) => item.operatorName !== '')).toBe(true);
      expect(
        sum(
          usage.items.map((item: { containerWork: Record<string, number> }) => item.containerWork),
          'containerCycleCount',
        ),
      ).toBeGreaterThan(20 * 30);

      const identifiers = await until(
        '/telemetry/identifier-sessions?limit=500',
        (body) => body.items.length >= 80,
        endReasons,
      );
      expect(new Set(identifiers.items.map((item: { endReason: string }) => item.endReason))).toEqual(
        new Set(['logout', 'ignition_off', 'identifier_change', 'timeout', 'ongoing']),
      );

      const operators = await until('/telemetry/operators?limit=100', (body) =>
        body.items.every((item: { sessionCount: number }) => item.sessionCount > 0),
      );

      expect(operators.items).toHaveLength(40);
      expect(
        operators.items.every(
          (item: { distanceM: number; durationSeconds: number }) => item.distanceM > 0 && item.durationSeconds > 0,
        ),
      ).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'reports hours of utilization and container work',
    async () => {
      type Hour = {
        utilizationPercent: number;
        idlePercent: number;
        containerWork: { loadedPercent: number; containerCycleCount: number };
      };
      // History hours are aligned to when the demo started, so a lunch break or a maintenance
      // stop may fall inside one clock hour: a working hour is one above 20 %, and the 10 h
      // history holds at least 9 full ones whatever the time of day.
      const busyHours = (body: { items: Hour[] }) => body.items.filter((item) => item.utilizationPercent > 20);
      const utilization = await until(
        '/telemetry/utilization?bucket=hour&groupBy=fleet',
        (body) => busyHours(body).length >= 9,
        (body) => body.items,
      );
      const figures = busyHours(utilization).map((item) => [
        item.idlePercent,
        item.containerWork.loadedPercent,
        item.containerWork.containerCycleCount,
      ]);
      expect(
        figures.every((values) => values.every((value) => value > 0)),
        JSON.stringify(figures),
      ).toBe(true);

      const work = await until(
        '/telemetry/container-work?bucket=hour&groupBy=asset&limit=500',
        (body) => new Set(body.items.map((item: { asset: { id: string } }) => item.asset.id)).size === 20,
        (body) => body.items.length,
      );
      expect(sum(work.items, 'containerCycleCount')).toBeGreaterThan(20 * 30);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'shows data quality, the geofences, and a forbidden-zone alert that opens and resolves',
    async () => {
      const quality = await until(
        '/telemetry/data-quality',
        (body) => body.summary.assetsWithData === 20 && body.summary.delayedAssets === 0,
        (body) => ({
          summary: body.summary,
          assets: body.assets.map((asset: { deviceId: string; status: string; notes: string[] }) => [
            asset.deviceId,
            asset.status,
            asset.notes,
          ]),
        }),
      );
      expect(quality.summary).toMatchObject({ telemetryAssets: 20, onlineAssets: 20, errorAssets: 0 });
      expect(quality.summary.qualityScore).toBeGreaterThan(90);

      const alerts = await until('/telemetry/geofence-alerts', (body) =>
        body.items.some((item: { resolvedAt: string | null }) => item.resolvedAt !== null),
      );

      const alert = alerts.items.find((item: { resolvedAt: string | null }) => item.resolvedAt !== null);
      expect(alert).toMatchObject({
        geofenceName: 'Quay crane exclusion zone',
        alertType: 'forbidden_enter',
        isActive: false,
        asset: { identifier: 'SC-01' },
      });
      expect(Date.parse(alert.createdAt)).toBeGreaterThanOrEqual(liveFrom - 5000);

      const geofences = await get('/telemetry/geofences');
      expect(
        geofences.items.map((item: { name: string; type: string; assetCount: number }) => [
          item.name,
          item.type,
          item.assetCount,
        ]),
      ).toEqual([
        ['Quay crane exclusion zone', 'forbidden', 0],
        ['Terminal yard', 'allowed', 20],
      ]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'has a dozen service requests in every state, in the metrics and the reporting overview',
    async () => {
      const requests = await get('/service-requests?limit=100');
      expect(requests.items).toHaveLength(13);
      expect(new Set(requests.items.map((item: { status: string }) => item.status))).toEqual(
        new Set(['new', 'triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed', 'cancelled']),
      );
      for (const item of requests.items) {
        if (item.status === 'resolved' || item.status === 'closed') expect(item.resolution).not.toBe('');
        if (item.status === 'cancelled')
          expect(item.history.at(-1)).toMatchObject({ type: 'cancelled', message: expect.stringMatching(/\w/) });
        // The history in order, starting when the request was created.
        const times = item.history.map((entry: { createdAt: string }) => Date.parse(entry.createdAt));
        expect(times).toEqual([...times].sort((a: number, b: number) => a - b));
        expect(times[0]! - Date.parse(item.createdAt)).toBeGreaterThanOrEqual(0);
        expect(times[0]! - Date.parse(item.createdAt)).toBeLessThan(1000);
        expect(times.at(-1)).toBeLessThan(Date.now());
      }
      const created = requests.items.map((item: { createdAt: string }) => Date.parse(item.createdAt));
      expect(Math.max(...created) - Math.min(...created)).toBeGreaterThan(30 * 86_400_000);
      expect(new Set(requests.items.map((item: { customerName: string }) => item.customerName))).toEqual(
        new Set(['Northbay Container Terminal', 'Harbour Logistics']),
      );

      const own = await get('/service-requests?limit=100', keys.customerKey);
      expect(own.items.length).toBeGreaterThan(0);
      expect(
        own.items.every((item: { customerName: string }) => item.customerName === 'Northbay Container Terminal'),
      ).toBe(true);

      const hourly = await get('/telemetry/service-request-metrics');
      expect(sum(hourly.items, 'totalCount')).toBe(4);
      const daily = await get('/telemetry/service-request-metrics?bucket=day&groupBy=asset');
      expect(sum(daily.items, 'totalCount')).toBe(11);
      expect(sum(daily.items, 'urgentPriorityCount')).toBeGreaterThan(0);

      const overview = await get('/reporting/overview');
      expect(overview.summary).toMatchObject({
        serviceRequests: 13,
        openServiceRequests: 7,
        resolvedServiceRequests: 1,
        closedServiceRequests: 3,
        cancelledServiceRequests: 2,
      });
      expect(overview.recentServiceRequests).toHaveLength(10);
      expect(overview.breakdowns.serviceRequestStatus.length).toBe(7);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'uploads no history again once the devices have sent data, and carries on from where they are',
    async () => {
      await started!.fleet.stop();
      started = await startDemoFleetFromDatabase(db.pool, { mqttUrl: broker.url, logger: silentLogger() });
      expect(started).toMatchObject({ devices: 20, history: false });
      expect(await started!.fleet.ready).toEqual({ historyReadings: 0, historyMessages: 0 });
    },
    TEST_TIMEOUT_MS,
  );
});
