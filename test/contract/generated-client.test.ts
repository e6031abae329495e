import createClient from 'openapi-fetch';
import { provisioning } from '@gantry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { provisioner } from '../support/fixtures.ts';
import {
  createFleet,
  createGeofence,
  createOperator,
  type Fleet,
  insertAlert,
  insertDeviceState,
  insertIdentifierSession,
  insertSegments,
  insertUsageSession,
} from '../telemetry-api/fixtures.ts';
// Made by `pnpm generate:client` (and by `pnpm typecheck`, which typechecks this file
// against it) from the document the API serves; not committed.
import type { paths } from './generated/external-api.ts';

// A client generated from the served document (openapi-typescript types, openapi-fetch
// calls) calls every GET operation of the external API against a seeded server. The
// table below must name every GET path of the document: `pnpm typecheck` fails when one
// is added without a call here, or when a call no longer fits the document.

type GetPath = { [P in keyof paths]: undefined extends paths[P]['get'] ? never : P }[keyof paths];

let db: TestDatabase;
let api: TestApi;
let fleet: Fleet;
let client: ReturnType<typeof createClient<paths>>;
const ids: Record<string, string> = {};
const range = { from: '2026-11-01', to: '2026-11-30' };
const metrics = { ...range, bucket: 'day', groupBy: 'asset' } as const;

beforeAll(async () => {
  db = await createTestDatabase('generated_client');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 1', 'Acme'],
    ['SC 2', 'Globex'],
  ]);
  client = createClient<paths>({
    baseUrl: `${api.url}/api/external/v1`,
    headers: { 'X-API-Key': fleet.tenantKey },
  });
  const t = fleet.tenantId;
  const asset = fleet.byName['SC 1']!;
  const deps = provisioner(db.pool);
  const type = await provisioning.createAssetType(deps, t, { name: 'Reach stacker' });
  const template = await provisioning.createTemplate(deps, t, { name: 'Daily check', assetTypeIds: [type.id] });
  const inspection = await provisioning.createInspection(deps, t, {
    assetId: asset.id,
    templateId: template.id,
    completedAt: '2026-11-20T08:00:00Z',
  });
  const report = await provisioning.createReport(deps, t, {
    inspectionId: inspection.id,
    impact: 'warning',
    outcome: 'completed',
  });
  Object.assign(ids, { asset: asset.id, inspection: inspection.id, report: report.id });

  await insertDeviceState(db.pool, t, asset, {
    lastSeenAt: new Date('2026-11-20T10:00:00Z'),
    latitude: 51.95,
    longitude: 4.05,
    adcOn: true,
    ignition: true,
    hourmeter: 36_000,
    identifier: 'RFID-1',
  });
  await insertSegments(db.pool, t, asset, [
    { start: '2026-11-20T08:00:00Z', seconds: 1800, moving: true, loaded: true, distanceM: 900, cycles: 2 },
    { start: '2026-11-20T08:30:00Z', seconds: 1800, moving: false, loaded: false },
  ]);
  await insertUsageSession(db.pool, t, asset, {
    start: '2026-11-20T08:00:00Z',
    end: '2026-11-20T09:00:00Z',
    identifier: 'RFID-1',
    distanceM: 900,
  });
  await insertIdentifierSession(db.pool, t, asset, {
    identifier: 'RFID-1',
    start: '2026-11-20T08:00:00Z',
    end: '2026-11-20T09:00:00Z',
  });
  await createOperator(db.pool, t, 'RFID-1', 'Jo Driver');
  const geofence = await createGeofence(db.pool, t, 'Quay', 'forbidden');
  await insertAlert(db.pool, t, geofence.id, asset, { createdAt: '2026-11-20T08:10:00Z' });

  // Written through the generated client itself: a subscription, then a request it hears of.
  const subscription = await client.POST('/webhooks/subscriptions', {
    body: { url: 'http://127.0.0.1:9/hook', events: ['service_request.created'] },
  });
  expect(subscription.response.status).toBe(201);
  ids.subscription = subscription.data!.id;
  const created = await client.POST('/service-requests', {
    body: { title: 'Hydraulic leak', assetId: asset.id, priority: 'high' },
  });
  expect(created.response.status).toBe(201);
  ids.serviceRequest = created.data!.id;
  // Without an asset: the answer's asset is null, which the generated type allows.
  const withoutAsset = await client.POST('/service-requests', { body: { title: 'Gate sticks' } });
  expect(withoutAsset.data?.asset).toBeNull();
  const form = new FormData();
  form.append('file', new Blob(['inspection notes']), 'notes.txt');
  const upload = await api.external(`/service-requests/${ids.serviceRequest}/files`, fleet.tenantKey, {
    method: 'POST',
    body: form,
  });
  expect(upload.status).toBe(201);
  ids.file = ((await upload.json()) as { id: string }).id;
  const deliveries = await client.GET('/webhooks/deliveries');
  ids.delivery = deliveries.data!.items[0]!.id;
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('a client generated from the served document', () => {
  it('calls every GET operation of the external API and gets its documented 200', async () => {
    const path = <T extends Record<string, string>>(values: T) => ({ params: { path: values } });
    const text = { parseAs: 'text' } as const;
    const calls: Record<GetPath, () => Promise<{ response: Response; data?: unknown; error?: unknown }>> = {
      '/': () => client.GET('/', text),
      '/guide': () => client.GET('/guide', text),
      '/public-docs': () => client.GET('/public-docs', text),
      '/docs': () => client.GET('/docs', text),
      '/openapi.json': () => client.GET('/openapi.json'),
      '/me': () => client.GET('/me'),
      '/reporting/overview': () => client.GET('/reporting/overview', { params: { query: range } }),
      '/reporting/assets': () => client.GET('/reporting/assets', { params: { query: { q: 'SC', limit: 10 } } }),
      '/assets': () => client.GET('/assets'),
      '/reporting/assets/{id}': () => client.GET('/reporting/assets/{id}', path({ id: ids.asset! })),
      '/reporting/asset-types': () => client.GET('/reporting/asset-types'),
      '/reporting/templates': () => client.GET('/reporting/templates'),
      '/reporting/inspections': () => client.GET('/reporting/inspections', { params: { query: range } }),
      '/reporting/inspections/{id}': () => client.GET('/reporting/inspections/{id}', path({ id: ids.inspection! })),
      '/reporting/reports': () => client.GET('/reporting/reports', { params: { query: range } }),
      '/reporting/reports/{id}': () => client.GET('/reporting/reports/{id}', path({ id: ids.report! })),
      '/reporting/export.csv': () => client.GET('/reporting/export.csv', { params: { query: range }, ...text }),
      '/reporting/export.xlsx': () => client.GET('/reporting/export.xlsx', { params: { query: range }, ...text }),
      '/telemetry/capabilities': () => client.GET('/telemetry/capabilities'),
      '/telemetry/assets/{assetId}/state': () =>
        client.GET('/telemetry/assets/{assetId}/state', path({ assetId: ids.asset! })),
      '/telemetry/assets/{assetId}/positions': () =>
        client.GET('/telemetry/assets/{assetId}/positions', {
          params: { path: { assetId: ids.asset! }, query: { ...range, resolution: '15min' } },
        }),
      '/telemetry/data-quality': () => client.GET('/telemetry/data-quality'),
      '/telemetry/devices': () => client.GET('/telemetry/devices', { params: { query: { enabled: 'true' } } }),
      '/telemetry/devices/clusters': () =>
        client.GET('/telemetry/devices/clusters', { params: { query: { zoom: 12, bbox: '3.9,51.8,4.2,52.1' } } }),
      '/telemetry/usage-sessions': () => client.GET('/telemetry/usage-sessions', { params: { query: range } }),
      '/telemetry/identifier-sessions': () =>
        client.GET('/telemetry/identifier-sessions', { params: { query: { ...range, identifier: 'RFID-1' } } }),
      '/telemetry/operators': () => client.GET('/telemetry/operators', { params: { query: range } }),
      '/telemetry/geofences': () => client.GET('/telemetry/geofences', { params: { query: { type: 'forbidden' } } }),
      '/telemetry/geofence-alerts': () => client.GET('/telemetry/geofence-alerts', { params: { query: range } }),
      '/telemetry/utilization': () => client.GET('/telemetry/utilization', { params: { query: metrics } }),
      '/telemetry/container-work': () => client.GET('/telemetry/container-work', { params: { query: metrics } }),
      '/telemetry/service-request-metrics': () =>
        client.GET('/telemetry/service-request-metrics', {
          params: { query: { ...range, bucket: 'day', groupBy: 'fleet' } },
        }),
      '/telemetry/utilization/export.csv': () =>
        client.GET('/telemetry/utilization/export.csv', { params: { query: metrics }, ...text }),
      '/telemetry/utilization/export.xlsx': () =>
        client.GET('/telemetry/utilization/export.xlsx', { params: { query: metrics }, ...text }),
      '/telemetry/container-work/export.csv': () =>
        client.GET('/telemetry/container-work/export.csv', { params: { query: metrics }, ...text }),
      '/telemetry/container-work/export.xlsx': () =>
        client.GET('/telemetry/container-work/export.xlsx', { params: { query: metrics }, ...text }),
      '/telemetry/service-request-metrics/export.csv': () =>
        client.GET('/telemetry/service-request-metrics/export.csv', { params: { query: metrics }, ...text }),
      '/telemetry/service-request-metrics/export.xlsx': () =>
        client.GET('/telemetry/service-request-metrics/export.xlsx', { params: { query: metrics }, ...text }),
      '/telemetry/devices/export.csv': () => client.GET('/telemetry/devices/export.csv', text),
      '/telemetry/devices/export.xlsx': () => client.GET('/telemetry/devices/export.xlsx', text),
      '/telemetry/usage-sessions/export.csv': () =>
        client.GET('/telemetry/usage-sessions/export.csv', { params: { query: range }, ...text }),
      '/telemetry/usage-sessions/export.xlsx': () =>
        client.GET('/telemetry/usage-sessions/export.xlsx', { params: { query: range }, ...text }),
      '/telemetry/identifier-sessions/export.csv': () =>
        client.GET('/telemetry/identifier-sessions/export.csv', { params: { query: range }, ...text }),
      '/telemetry/identifier-sessions/export.xlsx': () =>
        client.GET('/telemetry/identifier-sessions/export.xlsx', { params: { query: range }, ...text }),
      '/telemetry/operators/export.csv': () =>
        client.GET('/telemetry/operators/export.csv', { params: { query: range }, ...text }),
      '/telemetry/operators/export.xlsx': () =>
        client.GET('/telemetry/operators/export.xlsx', { params: { query: range }, ...text }),
      '/telemetry/positions/export.csv': () =>
        client.GET('/telemetry/positions/export.csv', {
          params: { query: { ...range, assetId: ids.asset! } },
          ...text,
        }),
      '/telemetry/positions/export.xlsx': () =>
        client.GET('/telemetry/positions/export.xlsx', {
          params: { query: { ...range, assetId: ids.asset! } },
          ...text,
        }),
      '/telemetry/geofence-alerts/export.csv': () =>
        client.GET('/telemetry/geofence-alerts/export.csv', { params: { query: range }, ...text }),
      '/telemetry/geofence-alerts/export.xlsx': () =>
        client.GET('/telemetry/geofence-alerts/export.xlsx', { params: { query: range }, ...text }),
      '/service-requests': () => client.GET('/service-requests', { params: { query: { priority: 'high' } } }),
      '/service-requests/{id}': () => client.GET('/service-requests/{id}', path({ id: ids.serviceRequest! })),
      '/service-requests/{id}/files': () =>
        client.GET('/service-requests/{id}/files', path({ id: ids.serviceRequest! })),
      '/service-requests/{id}/files/{fileId}': () =>
        client.GET('/service-requests/{id}/files/{fileId}', {
          params: { path: { id: ids.serviceRequest!, fileId: ids.file! } },
          ...text,
        }),
      '/webhooks/events': () => client.GET('/webhooks/events'),
      '/webhooks/subscriptions': () => client.GET('/webhooks/subscriptions'),
      '/webhooks/subscriptions/{id}': () => client.GET('/webhooks/subscriptions/{id}', path({ id: ids.subscription! })),
      '/webhooks/deliveries': () => client.GET('/webhooks/deliveries', { params: { query: { limit: 5 } } }),
      '/webhooks/deliveries/{id}': () => client.GET('/webhooks/deliveries/{id}', path({ id: ids.delivery! })),
    };

    // The table covers exactly the GET operations of the served document.
    const served = (await (await fetch(`${api.url}/api/external/v1/openapi.json`)).json()) as {
      paths: Record<string, { get?: unknown }>;
    };
    const documented = Object.entries(served.paths)
      .filter(([, item]) => item.get)
      .map(([p]) => p)
      .sort();
    expect(Object.keys(calls).sort()).toEqual(documented);

    const failures: string[] = [];
    for (const [name, call] of Object.entries(calls)) {
      const { response, error } = await call();
      if (response.status !== 200) failures.push(`${name}: ${response.status} ${JSON.stringify(error)}`);
    }
    expect(failures).toEqual([]);
  });

  it('reads typed answers: the nullable asset of fleet buckets and the nested AssetRef of sessions', async () => {
    // The requests were created today, whatever the fixed range of the telemetry above.
    const today = new Date().toISOString().slice(0, 10);
    const fleetBuckets = await client.GET('/telemetry/service-request-metrics', {
      params: { query: { from: today, to: today, bucket: 'day', groupBy: 'fleet' } },
    });
    const bucket = fleetBuckets.data!.items.find((item) => item.totalCount > 0);
    expect(bucket).toMatchObject({ groupType: 'fleet', asset: null, totalCount: 2 });
    const sessions = await client.GET('/telemetry/usage-sessions', { params: { query: range } });
    expect(sessions.data!.items[0]!.asset.name).toBe('SC 1');
    const missing = await client.GET('/reporting/assets/{id}', {
      params: { path: { id: '00000000-0000-4000-8000-000000000000' } },
    });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.code).toBe('not_found');
  });
});
