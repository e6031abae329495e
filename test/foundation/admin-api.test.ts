import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';

let db: TestDatabase;
let api: TestApi;

beforeAll(async () => {
  db = await createTestDatabase('admin_api');
  api = await startTestApi(db.pool, db.url);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

async function created(response: Response): Promise<Record<string, any>> {
  const body = (await json(response)) as Record<string, any>;
  expect(response.status, JSON.stringify(body)).toBe(201);
  return body;
}

const square = {
  type: 'Polygon',
  coordinates: [
    [
      [4.0, 51.9],
      [4.1, 51.9],
      [4.1, 52.0],
      [4.0, 52.0],
      [4.0, 51.9],
    ],
  ],
};

describe('admin API', () => {
  it('refuses every call without the admin token, and with a wrong one', async () => {
    const missing = await fetch(`${api.url}/api/admin/v1/tenants`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(401);
    expect(await json(missing)).toMatchObject({ code: 'missing_admin_token' });
    const wrong = await fetch(`${api.url}/api/admin/v1/tenants`, { headers: { Authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    expect((await json(wrong)).error).toBe('invalid admin token');
  });

  it('provisions a whole tenant: keys, asset types, assets, templates, inspections, reports, devices, operators, geofences', async () => {
    const tenant = await created(await api.admin('/tenants', { method: 'POST', json: { name: 'Port of Test' } }));
    expect(tenant).toMatchObject({ name: 'Port of Test' });
    const base = `/tenants/${tenant.id}`;

    const tenantKey = await created(
      await api.admin(`${base}/api-keys`, { method: 'POST', json: { name: 'integration' } }),
    );
    expect(tenantKey.key).toMatch(/^gk_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
    expect(tenantKey).toMatchObject({ customerScoped: false, customerName: null });
    const customerKey = await created(
      await api.admin(`${base}/api-keys`, { method: 'POST', json: { name: 'acme portal', customerName: 'Acme' } }),
    );
    expect(customerKey).toMatchObject({ customerScoped: true, customerName: 'Acme' });

    const type = await created(
      await api.admin(`${base}/asset-types`, { method: 'POST', json: { name: 'Reach stacker' } }),
    );
    // One model per resource: each admin answer is what the external API shows of it.
    const external = async (path: string) => json(await api.external(path, tenantKey.key));
    expect((await external('/reporting/asset-types')).items).toEqual([type]);
    const byName = await created(
      await api.admin(`${base}/assets`, {
        method: 'POST',
        json: {
          name: 'RS 1',
          identifier: 'RS-1',
          assetType: 'Reach stacker',
          customerName: 'Acme',
          location: 'Yard A',
        },
      }),
    );
    expect(byName).toMatchObject({
      assetType: 'Reach stacker',
      customerName: 'Acme',
      inspectionCount: 0,
      reportCount: 0,
      status: 'operational',
    });
    const byId = await created(
      await api.admin(`${base}/assets`, {
        method: 'POST',
        json: { name: 'RS 2', identifier: 'RS-2', assetTypeId: type.id },
      }),
    );
    expect(byId.assetType).toBe('Reach stacker');
    expect(await external(`/reporting/assets/${byName.id}`)).toEqual(byName);
    // `status` is the external API's name of the operational status.
    const outOfService = await created(
      await api.admin(`${base}/assets`, {
        method: 'POST',
        json: { name: 'RS 3', identifier: 'RS-3', assetTypeId: type.id, status: 'out_of_service' },
      }),
    );
    expect(outOfService).toMatchObject({ status: 'out_of_service', operationalStatus: 'out_of_service' });

    const template = await created(
      await api.admin(`${base}/templates`, { method: 'POST', json: { name: 'Pre-shift', assetTypeIds: [type.id] } }),
    );
    expect(template).toMatchObject({ latestVersion: 1, assetTypeIds: [type.id], status: 'active' });
    expect((await external('/reporting/templates')).items).toEqual([template]);

    const inspection = await created(
      await api.admin(`${base}/inspections`, {
        method: 'POST',
        json: { assetId: byName.id, templateId: template.id, completedAt: '2026-10-01T08:00:00Z' },
      }),
    );
    expect(inspection).toMatchObject({
      status: 'completed',
      completedAt: '2026-10-01T08:00:00.000Z',
      asset: { id: byName.id, name: 'RS 1', assetType: 'Reach stacker' },
      template: { id: template.id, name: 'Pre-shift', version: null },
      report: { id: null, count: 0 },
    });
    expect(await external(`/reporting/inspections/${inspection.id}`)).toEqual(inspection);
    const report = await created(
      await api.admin(`${base}/reports`, {
        method: 'POST',
        json: { inspectionId: inspection.id, impact: 'out_of_service', outcome: 'rejected', rejectionReason: 'Leak' },
      }),
    );
    expect(report).toMatchObject({
      inspectionId: inspection.id,
      asset: { id: byName.id },
      template: { id: template.id },
      impact: 'out_of_service',
      outcome: 'rejected',
      rejectionReason: 'Leak',
    });
    expect(await external(`/reporting/reports/${report.id}`)).toEqual(report);

    // The asset's derived reporting fields follow its inspections and reports.
    const asset = await db.pool.query(
      'SELECT inspection_count, report_count, latest_impact, latest_outcome, latest_inspection_at FROM assets WHERE id = $1',
      [byName.id],
    );
    expect(asset.rows[0]).toMatchObject({
      inspection_count: 1,
      report_count: 1,
      latest_impact: 'out_of_service',
      latest_outcome: 'rejected',
    });
    expect(asset.rows[0].latest_inspection_at.toISOString()).toBe('2026-10-01T08:00:00.000Z');

    // Both raised their webhook events in the outbox.
    const events = await db.pool.query(
      'SELECT event_type, entity_id FROM webhook_events WHERE tenant_id = $1 ORDER BY created_at',
      [tenant.id],
    );
    expect(events.rows).toEqual([
      { event_type: 'inspection.completed', entity_id: inspection.id },
      { event_type: 'report.created', entity_id: report.id },
    ]);

    const device = await created(
      await api.admin(`${base}/devices`, {
        method: 'POST',
        json: { deviceId: 'trk-001', assetId: byName.id, displayName: 'Tracker 1' },
      }),
    );
    expect(device).toMatchObject({ deviceId: 'trk-001', assetId: byName.id, enabled: true });
    const patched = await api.admin(`${base}/devices/${device.id}`, {
      method: 'PATCH',
      json: { enabled: false, assetId: byId.id },
    });
    expect(patched.status).toBe(200);
    expect(await json(patched)).toMatchObject({ enabled: false, assetId: byId.id, displayName: 'Tracker 1' });

    const operator = await created(
      await api.admin(`${base}/operators`, { method: 'POST', json: { identifier: 'RFID-42', operatorName: 'Ana' } }),
    );
    expect(operator).toMatchObject({ identifier: 'RFID-42', operatorName: 'Ana' });

    const geofence = await created(
      await api.admin(`${base}/geofences`, {
        method: 'POST',
        json: { name: 'Quay', type: 'forbidden', enabled: true, geometry: square },
      }),
    );
    expect(geofence).toMatchObject({ name: 'Quay', type: 'forbidden', enabled: true, geometry: square });
    expect((await external('/telemetry/geofences')).items).toEqual([geofence]);
    const renamed = await api.admin(`${base}/geofences/${geofence.id}`, {
      method: 'PATCH',
      json: { name: 'Quay 2', enabled: false },
    });
    const renamedBody = await json(renamed);
    expect(renamedBody).toMatchObject({ name: 'Quay 2', enabled: false, type: 'forbidden' });
    expect((await external('/telemetry/geofences')).items).toEqual([renamedBody]);
    const deleted = await api.admin(`${base}/geofences/${geofence.id}`, { method: 'DELETE' });
    expect(await json(deleted)).toEqual({ id: geofence.id, deleted: true });
    expect((await api.admin(`${base}/geofences/${geofence.id}`, { method: 'DELETE' })).status).toBe(404);

    // The keys work against the external API with their scope.
    const me = await api.external('/me', customerKey.key);
    expect(await json(me)).toEqual({
      tenant: { id: tenant.id, name: 'Port of Test' },
      apiKey: { name: 'acme portal', customerName: 'Acme', customerScoped: true },
      version: 'v1',
    });
    const disabled = await api.admin(`${base}/api-keys/${customerKey.id}`, { method: 'DELETE' });
    expect(await json(disabled)).toMatchObject({ enabled: false });
    expect((await api.external('/me', customerKey.key)).status).toBe(401);
    expect((await api.external('/me', tenantKey.key)).status).toBe(200);
  });

  it.each([
    ['/tenants', {}, 'name'],
    ['/tenants', { name: '' }, 'name'],
    ['/tenants', { name: 42 }, 'name'],
  ])('POST %s with %j answers 400 naming %s', async (path, payload, field) => {
    const response = await api.admin(path, { method: 'POST', json: payload });
    expect(response.status).toBe(400);
    expect((await json(response)).error).toContain(field);
  });

  it('ignores fields it does not know, like the responses clients must tolerate', async () => {
    const response = await api.admin('/tenants', { method: 'POST', json: { name: 'Extra fields', extra: true } });
    expect(response.status).toBe(201);
    const body = await json(response);
    expect(body.name).toBe('Extra fields');
    expect(body).not.toHaveProperty('extra');
  });

  it('answers 400 for bad bodies of every resource and 404 for an unknown tenant', async () => {
    const tenant = await created(await api.admin('/tenants', { method: 'POST', json: { name: 'Bad bodies' } }));
    const base = `/tenants/${tenant.id}`;
    const cases: Array<[string, unknown, string]> = [
      ['api-keys', { customerName: 'x' }, 'name'],
      ['asset-types', { name: 42 }, 'name'],
      ['assets', { name: 'A' }, 'identifier'],
      ['assets', { name: 'A', identifier: 'A', assetType: 'Nope' }, 'assetType'],
      ['templates', { name: 'T', assetTypeIds: ['not-a-uuid'] }, 'assetTypeIds'],
      ['inspections', { assetId: '00000000-0000-4000-8000-000000000000' }, 'assetId'],
      ['inspections', { assetId: 'x' }, 'assetId'],
      ['reports', { inspectionId: '00000000-0000-4000-8000-000000000000' }, 'inspectionId'],
      ['devices', { deviceId: 'bad id with spaces', assetId: '00000000-0000-4000-8000-000000000000' }, 'deviceId'],
      ['operators', { identifier: 'X' }, 'operatorName'],
      [
        'geofences',
        {
          name: 'G',
          type: 'forbidden',
          geometry: {
            type: 'Polygon',
            coordinates: [
              [
                [0, 0],
                [1, 1],
              ],
            ],
          },
        },
        'geometry',
      ],
      ['geofences', { name: 'G', type: 'nope', geometry: square }, 'type'],
      ['geofences', { name: 'G', type: 'allowed', geometry: { type: 'Point', coordinates: [1, 2] } }, 'geometry'],
    ];
    for (const [path, payload, field] of cases) {
      const response = await api.admin(`${base}/${path}`, { method: 'POST', json: payload });
      const body = await json(response);
      expect(response.status, `${path} ${JSON.stringify(payload)} → ${JSON.stringify(body)}`).toBe(400);
      expect(body.error).toContain(field);
    }
    const notJson = await api.admin(`${base}/assets`, {
      method: 'POST',
      body: '{"name":',
      headers: { 'Content-Type': 'application/json' },
    });
    expect(notJson.status).toBe(400);
    expect(
      (
        await api.admin('/tenants/00000000-0000-4000-8000-000000000000/assets', {
          method: 'POST',
          json: { name: 'A', identifier: 'A' },
        })
      ).status,
    ).toBe(404);
    expect((await api.admin('/tenants/not-a-uuid/assets', { method: 'POST', json: {} })).status).toBe(400);
  });

  it('answers 409 for a duplicate device id and asset identifier', async () => {
    const tenant = await created(await api.admin('/tenants', { method: 'POST', json: { name: 'Dupes' } }));
    const base = `/tenants/${tenant.id}`;
    const asset = await created(
      await api.admin(`${base}/assets`, { method: 'POST', json: { name: 'A', identifier: 'DUP-1' } }),
    );
    expect(
      (await api.admin(`${base}/assets`, { method: 'POST', json: { name: 'B', identifier: 'DUP-1' } })).status,
    ).toBe(409);
    await created(
      await api.admin(`${base}/devices`, { method: 'POST', json: { deviceId: 'dup-device', assetId: asset.id } }),
    );
    expect(
      (await api.admin(`${base}/devices`, { method: 'POST', json: { deviceId: 'dup-device', assetId: asset.id } }))
        .status,
    ).toBe(409);
  });
});
