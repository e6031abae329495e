import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { provisioning } from '@gantry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { provisioner } from '../support/fixtures.ts';
import { nodeArguments } from '../support/processes.ts';

const run = promisify(execFile);

let db: TestDatabase;
let api: TestApi;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase('provisioning_import');
  api = await startTestApi(db.pool, db.url);
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-import-'));
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

let tenants = 0;
async function newTenant(): Promise<string> {
  tenants += 1;
  return (await provisioning.createTenant(provisioner(db.pool), { name: `Import ${tenants}` })).id;
}

function postFile(tenantId: string, body: string, contentType: string): Promise<Response> {
  return api.admin(`/tenants/${tenantId}/import`, { method: 'POST', body, headers: { 'Content-Type': contentType } });
}

/** What a tenant holds, as a user would check it after an import. */
async function holdings(tenantId: string) {
  const { rows: assets } = await db.pool.query(
    `SELECT a.identifier, a.name, a.customer_name, a.external_ref, t.name AS asset_type, a.updated_at
       FROM assets a LEFT JOIN asset_types t ON t.id = a.asset_type_id WHERE a.tenant_id = $1 ORDER BY a.identifier`,
    [tenantId],
  );
  const { rows: devices } = await db.pool.query(
    `SELECT d.device_id, a.identifier, d.display_name, d.enabled, d.updated_at
       FROM devices d JOIN assets a ON a.id = d.asset_id WHERE d.tenant_id = $1 ORDER BY d.device_id`,
    [tenantId],
  );
  return { assets, devices };
}

const fleetCsv = [
  'identifier,name,assetType,customerName,externalRef,deviceId,deviceName,enabled',
  'SC-01,Straddle carrier 1,Straddle carrier,Acme,ERP-1,imp-sc01-a,Main unit,true',
  'SC-01,Straddle carrier 1,Straddle carrier,Acme,ERP-1,imp-sc01-b,Spare unit,false',
  '"RS-02","Reach stacker, west",Reach stacker,Globex,,imp-rs02-a,,',
  'FL-03,Forklift 3,,,,,,',
].join('\n');

describe('bulk import (POST /api/admin/v1/tenants/{tenantId}/import)', () => {
  it('imports assets with their type, customer and devices from a CSV file', async () => {
    const tenantId = await newTenant();
    const response = await postFile(tenantId, fleetCsv, 'text/csv');
    const body = await json(response);
    expect(response.status, JSON.stringify(body)).toBe(200);
    expect(body).toEqual({
      rows: 4,
      assetTypes: { created: 2 },
      assets: { created: 3, updated: 0, unchanged: 0 },
      devices: { created: 3, updated: 0, unchanged: 0 },
    });
    const { assets, devices } = await holdings(tenantId);
    expect(assets.map((a) => [a.identifier, a.name, a.asset_type, a.customer_name, a.external_ref])).toEqual([
      ['FL-03', 'Forklift 3', null, '', ''],
      ['RS-02', 'Reach stacker, west', 'Reach stacker', 'Globex', ''],
      ['SC-01', 'Straddle carrier 1', 'Straddle carrier', 'Acme', 'ERP-1'],
    ]);
    expect(devices.map((d) => [d.device_id, d.identifier, d.display_name, d.enabled])).toEqual([
      ['imp-rs02-a', 'RS-02', '', true],
      ['imp-sc01-a', 'SC-01', 'Main unit', true],
      ['imp-sc01-b', 'SC-01', 'Spare unit', false],
    ]);
    // The customer is known to the tenant, so a customer key can be made for it.
    const { rows } = await db.pool.query('SELECT name FROM customers WHERE tenant_id = $1 ORDER BY name', [tenantId]);
    expect(rows.map((row) => row.name)).toEqual(['Acme', 'Globex']);
  });

  it('imports the same rows from a JSON file', async () => {
    const tenantId = await newTenant();
    const rows = [
      { identifier: 'J-1', name: 'Json one', assetType: 'Crane', customerName: 'Acme', deviceId: 'imp-json-1' },
      { identifier: 'J-2', name: 'Json two', deviceId: 'imp-json-2', deviceName: 'Cab', enabled: false },
    ];
    const response = await api.admin(`/tenants/${tenantId}/import`, { method: 'POST', json: { rows } });
    const body = await json(response);
    expect(response.status, JSON.stringify(body)).toBe(200);
    expect(body.assets).toEqual({ created: 2, updated: 0, unchanged: 0 });
    const { devices } = await holdings(tenantId);
    expect(devices.map((d) => [d.device_id, d.identifier, d.display_name, d.enabled])).toEqual([
      ['imp-json-1', 'J-1', '', true],
      ['imp-json-2', 'J-2', 'Cab', false],
    ]);
  });

  it('refuses a file with bad rows with 422, every row at fault listed, and writes nothing', async () => {
    const tenantId = await newTenant();
    const bad = [
      'identifier,name,deviceId',
      'OK-1,Fine,imp-bad-ok',
      ',No identifier,imp-bad-2',
      'OK-3,Bad device id,has space',
      'OK-4,Duplicate device,imp-bad-ok',
    ].join('\n');
    const response = await postFile(tenantId, bad, 'text/csv');
    const body = await json(response);
    expect(response.status).toBe(422);
    expect(body.code).toBe('invalid_rows');
    expect(body.problems).toEqual([
      { row: 2, field: 'identifier', message: 'must not be empty' },
      { row: 3, field: 'deviceId', message: 'must be 1–64 letters, digits or . _ : -' },
    ]);
    const duplicate = await json(
      await postFile(tenantId, [bad.split('\n')[0], bad.split('\n')[1], bad.split('\n')[4]].join('\n'), 'text/csv'),
    );
    expect(duplicate.problems).toEqual([
      { row: 2, field: 'deviceId', message: 'device "imp-bad-ok" is already in row 1' },
    ]);
    const header = await json(await postFile(tenantId, 'identifier,name,devicId\nH-1,Typo,imp-typo', 'text/csv'));
    expect(header.problems).toEqual([{ row: 0, field: 'devicId', message: expect.stringContaining('unknown column') }]);
    const nul = await api.admin(`/tenants/${tenantId}/import`, {
      method: 'POST',
      json: {
        rows: [
          { identifier: 'N-1', name: 'Nul\u0000name' },
          { identifier: 'N-2', name: 'Fine', extra: 1 },
        ],
      },
    });
    expect(nul.status).toBe(422);
    expect((await json(nul)).problems).toEqual([
      { row: 1, field: 'name', message: 'must not contain NUL characters' },
      { row: 2, field: 'extra', message: expect.stringContaining('extra') },
    ]);
    expect(await holdings(tenantId)).toEqual({ assets: [], devices: [] });
  });

  it('refuses a file naming a device of another tenant, writing none of its rows', async () => {
    const owner = await newTenant();
    expect((await postFile(owner, 'identifier,name,deviceId\nX-1,Owned,imp-owned', 'text/csv')).status).toBe(200);
    const tenantId = await newTenant();
    const response = await postFile(
      tenantId,
      'identifier,name,deviceId\nY-1,Fine,imp-free\nY-2,Taken,imp-owned',
      'text/csv',
    );
    expect(response.status).toBe(422);
    expect((await json(response)).problems).toEqual([
      { row: 2, field: 'deviceId', message: 'device "imp-owned" is registered to another tenant' },
    ]);
    expect(await holdings(tenantId)).toEqual({ assets: [], devices: [] });
  });

  it('changes nothing when the same file is imported again: same counts, same updated_at', async () => {
    const tenantId = await newTenant();
    // Device ids are global: this tenant's own.
    const csv = fleetCsv.replaceAll('imp-', 'again-');
    expect((await postFile(tenantId, csv, 'text/csv')).status).toBe(200);
    const before = await holdings(tenantId);
    const again = await json(await postFile(tenantId, csv, 'text/csv'));
    expect(again).toEqual({
      rows: 4,
      assetTypes: { created: 0 },
      assets: { created: 0, updated: 0, unchanged: 3 },
      devices: { created: 0, updated: 0, unchanged: 3 },
    });
    expect(await holdings(tenantId)).toEqual(before);

    // A changed row updates only what it changes.
    const renamed = csv.replace('Forklift 3', 'Forklift three');
    const third = await json(await postFile(tenantId, renamed, 'text/csv'));
    expect(third.assets).toEqual({ created: 0, updated: 1, unchanged: 2 });
    const after = await holdings(tenantId);
    expect(after.assets.find((a) => a.identifier === 'FL-03')?.name).toBe('Forklift three');
    expect(after.devices).toEqual(before.devices);
  });

  it('answers 415 for a body that is neither CSV nor JSON, and 404 for an unknown tenant', async () => {
    const tenantId = await newTenant();
    expect((await postFile(tenantId, fleetCsv, 'text/plain')).status).toBe(415);
    const missing = await postFile('00000000-0000-4000-8000-000000000000', fleetCsv, 'text/csv');
    expect(missing.status).toBe(404);
  });

  it('imports a file through the built CLI (gantry import FILE --tenant ID), and again without change', async () => {
    const tenantId = await newTenant();
    const file = path.join(dir, 'fleet.csv');
    writeFileSync(file, fleetCsv.replaceAll('imp-', 'cli-'));
    const env = { ...process.env, GANTRY_DATABASE_URL: db.url, GANTRY_LOG_LEVEL: 'silent' };
    const first = await run(process.execPath, nodeArguments('cli', 'import', file, '--tenant', tenantId), { env });
    expect(JSON.parse(first.stdout).devices).toEqual({ created: 3, updated: 0, unchanged: 0 });
    const second = await run(process.execPath, nodeArguments('cli', 'import', file, '--tenant', tenantId), { env });
    expect(JSON.parse(second.stdout).devices).toEqual({ created: 0, updated: 0, unchanged: 3 });
    expect((await holdings(tenantId)).devices.map((d) => d.device_id)).toEqual([
      'cli-rs02-a',
      'cli-sc01-a',
      'cli-sc01-b',
    ]);

    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ rows: [{ identifier: 'Z-1' }] }));
    const failed = await run(process.execPath, nodeArguments('cli', 'import', bad, '--tenant', tenantId), {
      env,
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr).toContain('row 1 name:');
  });
});
