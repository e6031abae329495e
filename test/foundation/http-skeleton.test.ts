import { Writable } from 'node:stream';
import { createLogger } from '@gantry/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let tenant: TenantFixture;
const logLines: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('http_skeleton');
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  api = await startTestApi(
    db.pool,
    db.url,
    { GANTRY_MAX_JSON_BYTES: '2048' },
    createLogger({ level: 'debug', format: 'json', destination: sink }),
  );
  tenant = await createTenantWithKeys(db.pool, ['Acme']);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('authentication (spec: Authentication)', () => {
  it('GET /me answers the tenant, key scope and version for tenant and customer keys', async () => {
    const tenantMe = await json(await api.external('/me', tenant.tenantKey));
    expect(tenantMe).toEqual({
      tenant: { id: tenant.tenantId, name: 'Test tenant' },
      apiKey: { name: 'tenant key', customerName: null, customerScoped: false },
      version: 'v1',
    });
    const customerMe = await json(await api.external('/me', tenant.customerKeys.Acme!));
    expect(customerMe.apiKey).toEqual({ name: 'Acme key', customerName: 'Acme', customerScoped: true });
  });

  it.each([
    ['no key', null],
    ['an empty key', ''],
    ['a malformed key', 'hello'],
    ['a well-formed unknown key', `gk_aaaaaaaaaaaa_${'A'.repeat(43)}`],
  ])('answers 401 with {"error"} for %s', async (_label, key) => {
    const response = await api.external('/me', key);
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toMatch(/application\/json/);
    const body = await json(response);
    expect(typeof body.error).toBe('string');
    expect(body.error).not.toMatch(/select|sql|stack|at /i);
  });

  it('answers 401 for a known key prefix with a wrong secret', async () => {
    const wrong = `${tenant.tenantKey.slice(0, 16)}${'B'.repeat(43)}`;
    expect((await api.external('/me', wrong)).status).toBe(401);
  });

  it('stores keys hashed and never writes them to the logs', async () => {
    await api.external('/me', tenant.tenantKey);
    const stored = await db.pool.query<{ row: string }>('SELECT row_to_json(k)::text AS row FROM api_keys k');
    const secret = tenant.tenantKey.split('_').at(-1)!;
    for (const { row } of stored.rows) {
      expect(row).not.toContain(tenant.tenantKey);
      expect(row).not.toContain(secret);
    }
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('\n')).not.toContain(secret);
  });
});

describe('HTTP skeleton', () => {
  it('answers unknown paths with a JSON 404 and echoes a request id', async () => {
    const response = await api.external('/no-such-thing', tenant.tenantKey);
    expect(response.status).toBe(404);
    expect(await json(response)).toMatchObject({ code: 'not_found' });
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await fetch(`${api.url}/healthz`, { headers: { 'X-Request-Id': 'trace-123' } });
    expect(echoed.headers.get('x-request-id')).toBe('trace-123');
  });

  it('answers 413 with {"error"} for a JSON body over the limit', async () => {
    const response = await api.admin('/tenants', { method: 'POST', json: { name: 'x'.repeat(5000) } });
    expect(response.status).toBe(413);
    expect(await json(response)).toMatchObject({ code: 'payload_too_large' });
  });

  it('serves /healthz, /readyz and Prometheus /metrics', async () => {
    expect(await json(await fetch(`${api.url}/healthz`))).toEqual({ status: 'ok' });
    const ready = await fetch(`${api.url}/readyz`);
    expect(ready.status).toBe(200);
    // Without GANTRY_DATABASE_READ_URL the process uses the primary alone.
    expect(await json(ready)).toEqual({
      status: 'ready',
      checks: { database: { ok: true } },
      databases: { primary: { endpoint: expect.stringMatching(/^127\.0\.0\.1:\d+\/\w+$/) } },
    });
    const metrics = await fetch(`${api.url}/metrics`);
    expect(metrics.headers.get('content-type')).toMatch(/text\/plain/);
    const text = await metrics.text();
    expect(text).toContain('# TYPE gantry_http_request_duration_seconds histogram');
    expect(text).toMatch(/gantry_http_request_duration_seconds_count\{[^}]*route="getMe"[^}]*\} \d+/);
  });
});
