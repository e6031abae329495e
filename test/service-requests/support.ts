import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { provisioning } from '@gantry/api';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTenantWithKeys, provisioner, type TenantFixture } from '../support/fixtures.ts';

/** A database, an API with its own data directory, and a tenant with a tenant key and customer keys. */
export interface ServiceRequestWorld {
  db: TestDatabase;
  api: TestApi;
  tenant: TenantFixture;
  dataDir: string;
  close(): Promise<void>;
}

export async function startWorld(
  label: string,
  customers: string[] = ['Acme', 'Globex'],
  env: Record<string, string> = {},
): Promise<ServiceRequestWorld> {
  const db = await createTestDatabase(label);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-sr-'));
  // These tests make many calls in a row; the rate limit is not what they test.
  const api = await startTestApi(db.pool, db.url, {
    GANTRY_DATA_DIR: dataDir,
    GANTRY_RATE_LIMIT_PER_SECOND: '10000',
    GANTRY_RATE_LIMIT_BURST: '10000',
    ...env,
  });
  const tenant = await createTenantWithKeys(db.pool, customers);
  return {
    db,
    api,
    tenant,
    dataDir,
    async close() {
      await api.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function createAsset(world: ServiceRequestWorld, identifier: string, customerName: string) {
  return provisioning.createAsset(provisioner(world.db.pool), world.tenant.tenantId, {
    name: `Asset ${identifier}`,
    identifier,
    customerName,
    location: 'Yard B',
  });
}

export function jsonInit(method: string, body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method, headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Body = any;

/** POST /service-requests, expecting 201. */
export async function createRequest(
  world: ServiceRequestWorld,
  key: string,
  body: Record<string, unknown>,
): Promise<Body> {
  const response = await world.api.external('/service-requests', key, jsonInit('POST', body));
  const created = await json(response);
  expect(response.status, JSON.stringify(created)).toBe(201);
  return created;
}

/** PATCH /service-requests/{id}; returns status and body. */
export async function patchRequest(world: ServiceRequestWorld, key: string, id: string, body: Record<string, unknown>) {
  const response = await world.api.external(`/service-requests/${id}`, key, jsonInit('PATCH', body));
  return { status: response.status, body: (await json(response)) as Body };
}

/** The outbox events written for one service request, oldest first. */
export async function outboxEvents(
  world: ServiceRequestWorld,
  entityId: string,
): Promise<{ event_type: string; data: Body }[]> {
  const { rows } = await world.db.pool.query(
    'SELECT event_type, data FROM webhook_events WHERE entity_id = $1 ORDER BY created_at, id',
    [entityId],
  );
  return rows as { event_type: string; data: Body }[];
}
