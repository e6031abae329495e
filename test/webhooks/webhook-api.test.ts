import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookEventTypes } from '@gantry/contracts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';
import { produceEvent } from './helpers.ts';

let db: TestDatabase;
let api: TestApi;
let strictApi: TestApi;
let tenant: TenantFixture;
let other: TenantFixture;

beforeAll(async () => {
  db = await createTestDatabase('webhook_api');
  api = await startTestApi(db.pool, db.url, {
    GANTRY_WEBHOOK_MAX_ATTEMPTS: '5',
    GANTRY_WEBHOOK_BACKOFF_SECONDS: '2,30,120',
    GANTRY_WEBHOOK_TIMEOUT_SECONDS: '7',
  });
  // A deployment with the default policy: private targets refused.
  strictApi = await startTestApi(db.pool, db.url, { GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  tenant = await createTenantWithKeys(db.pool, ['Acme'], 'Webhook tenant');
  other = await createTenantWithKeys(db.pool, [], 'Other tenant');
});
afterAll(async () => {
  await api?.close();
  await strictApi?.close();
  await db?.drop();
});

function send(path: string, key: string, method: string, body?: unknown, target: TestApi = api) {
  return target.external(path, key, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } }),
  });
}

async function createSubscription(body: Record<string, unknown>, key = tenant.tenantKey) {
  const response = await send('/webhooks/subscriptions', key, 'POST', body);
  const answer = await json(response);
  expect(response.status, JSON.stringify(answer)).toBe(201);
  return answer;
}

describe('GET /webhooks/events', () => {
  it('lists all eight events with labels and the delivery contract from the configuration', async () => {
    const response = await api.external('/webhooks/events', tenant.tenantKey);
    expect(response.status).toBe(200);
    const body = await json(response);
    expect(body.items.map((item: { id: string }) => item.id)).toEqual([
      'inspection.completed',
      'report.created',
      'service_request.created',
      'service_request.updated',
      'service_request.cancelled',
      'telemetry.geofence_alert.opened',
      'telemetry.geofence_alert.acknowledged',
      'telemetry.geofence_alert.resolved',
    ]);
    for (const item of body.items) expect(item.label).toMatch(/^[A-Z][a-z]+( [a-z]+)+$/);
    expect(body.delivery).toMatchObject({
      method: 'POST',
      contentType: 'application/json',
      signatureHeader: 'X-Service-Signature',
      timestampHeader: 'X-Service-Webhook-Timestamp',
      idHeader: 'X-Service-Webhook-Id',
      attemptHeader: 'X-Service-Webhook-Attempt',
      signatureAlgorithm: 'hmac-sha256',
      signedContent: 'raw_body',
      successStatusCodes: ['2xx'],
      retryStrategy: { maxAttempts: 5, backoffSeconds: [2, 30, 120] },
      timeoutSeconds: 7,
    });
    expect(body.delivery.headers).toEqual(
      expect.arrayContaining([
        'X-Service-Signature',
        'X-Service-Webhook-Timestamp',
        'X-Service-Webhook-Id',
        'X-Service-Webhook-Attempt',
      ]),
    );
    expect(Object.keys(body.payload).sort()).toEqual([
      'createdAt',
      'data',
      'entityId',
      'entityType',
      'event',
      'tenantId',
    ]);
  });

  it('serves the spec defaults (3 attempts, 15 and 60 s, 10 s) when nothing is configured', async () => {
    const body = await json(await strictApi.external('/webhooks/events', tenant.tenantKey));
    expect(body.delivery.retryStrategy).toEqual({ maxAttempts: 3, backoffSeconds: [15, 60] });
    expect(body.delivery.timeoutSeconds).toBe(10);
  });

  it('needs a key, but any key: the catalog describes the service, not tenant data', async () => {
    expect((await api.external('/webhooks/events', null)).status).toBe(401);
    expect((await api.external('/webhooks/events', tenant.customerKeys.Acme!)).status).toBe(200);
  });
});

describe('subscriptions', () => {
  it('creates a subscription with a generated secret shown once, then only a masked preview', async () => {
    const created = await createSubscription({
      name: 'ERP',
      url: 'http://127.0.0.1:9/hooks',
      events: ['report.created', 'service_request.created'],
    });
    expect(created).toMatchObject({
      name: 'ERP',
      url: 'http://127.0.0.1:9/hooks',
      enabled: true,
      events: ['report.created', 'service_request.created'],
      secretSet: true,
    });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(created.secretPreview).toBe(`whsec_****${created.secret.slice(-4)}`);

    const listed = await json(await api.external('/webhooks/subscriptions', tenant.tenantKey));
    const mine = listed.items.find((item: { id: string }) => item.id === created.id);
    expect(mine).toMatchObject({ name: 'ERP', secretSet: true, secretPreview: created.secretPreview });
    expect(JSON.stringify(listed)).not.toContain(created.secret);
    const one = await json(await api.external(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey));
    expect(one.secret).toBeUndefined();
    expect(one.createdAt).toBe(created.createdAt);
  });

  it('takes a given secret, or none (unsigned), and names the subscription after the host by default', async () => {
    const given = await createSubscription({
      url: 'http://127.0.0.1:9/given',
      events: ['report.created'],
      secret: 'my-own-secret-0123456789',
    });
    expect(given).toMatchObject({ name: '127.0.0.1:9', secretSet: true, secretPreview: '****6789' });
    // A secret the client chose is never echoed (only a generated one is shown, once).
    expect(given).not.toHaveProperty('secret');
    expect(JSON.stringify(given)).not.toContain('my-own-secret-0123456789');
    const changedSecret = await send(`/webhooks/subscriptions/${given.id}`, tenant.tenantKey, 'PATCH', {
      secret: 'another-own-secret-0123456789',
    });
    expect(changedSecret.status).toBe(200);
    const changedBody = await json(changedSecret);
    expect(changedBody).toMatchObject({ secretSet: true, secretPreview: '****6789' });
    expect(changedBody).not.toHaveProperty('secret');
    const unsigned = await createSubscription({
      url: 'http://127.0.0.1:9/unsigned',
      events: ['report.created'],
      secret: null,
    });
    const longHost = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(40)}.example`;
    const named = await createSubscription({ url: `http://${longHost}/hook`, events: ['report.created'] });
    expect(named.name).toBe(longHost.slice(0, 200));
    expect(unsigned).toMatchObject({ secretSet: false, secretPreview: '' });
    expect(unsigned).not.toHaveProperty('secret');
  });

  it('changes name, url, events and enabled, rotates the secret (shown in that answer only) and deletes', async () => {
    const created = await createSubscription({ url: 'http://127.0.0.1:9/a', events: ['report.created'] });
    const patched = await send(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey, 'PATCH', {
      name: 'Renamed',
      url: 'http://127.0.0.1:9/b',
      events: ['telemetry.geofence_alert.opened', 'telemetry.geofence_alert.opened'],
      enabled: false,
    });
    expect(patched.status).toBe(200);
    const changed = await json(patched);
    expect(changed).toMatchObject({
      name: 'Renamed',
      url: 'http://127.0.0.1:9/b',
      events: ['telemetry.geofence_alert.opened'],
      enabled: false,
    });
    expect(changed.secret).toBeUndefined();
    expect(changed.secretPreview).toBe(created.secretPreview);

    const rotated = await json(
      await send(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey, 'PATCH', { rotateSecret: true }),
    );
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.secretPreview).toBe(`whsec_****${rotated.secret.slice(-4)}`);
    const { rows } = await db.pool.query('SELECT secret FROM webhook_subscriptions WHERE id = $1', [created.id]);
    expect(rows[0].secret).toBe(rotated.secret);

    const deleted = await send(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey, 'DELETE');
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ id: created.id, deleted: true });
    expect((await api.external(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey)).status).toBe(404);
    expect((await send(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey, 'DELETE')).status).toBe(404);
    const listed = await json(await api.external('/webhooks/subscriptions', tenant.tenantKey));
    expect(listed.items.map((item: { id: string }) => item.id)).not.toContain(created.id);
  });

  it('refuses bad bodies with 400 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ url: 'ftp://127.0.0.1/x', events: ['report.created'] }, /url: must use http or https/],
      [{ url: 'not a url', events: ['report.created'] }, /url: must be an absolute/],
      [{ url: 'http://user:pw@127.0.0.1/x', events: ['report.created'] }, /url: must not carry credentials/],
      [{ url: 'http://127.0.0.1/x', events: [] }, /events: must name at least one event/],
      [{ url: 'http://127.0.0.1/x', events: ['report.deleted'] }, /events\.0: must be one of/],
      [{ url: 'http://127.0.0.1/x' }, /events/],
      [{ events: ['report.created'] }, /url/],
      [{ url: 'http://127.0.0.1/x', events: ['report.created'], secret: 'short' }, /secret: at least 16 characters/],
      [{ url: 'http://127.0.0.1/x', events: ['report.created'], enabled: 'yes' }, /enabled/],
    ];
    for (const [body, message] of cases) {
      const response = await send('/webhooks/subscriptions', tenant.tenantKey, 'POST', body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect((await json(response)).error).toMatch(message);
    }
    // Unknown fields are ignored, as clients ignore unknown response fields.
    const extra = await send('/webhooks/subscriptions', tenant.tenantKey, 'POST', {
      url: 'http://127.0.0.1:9/e',
      events: ['report.created'],
      colour: 'red',
    });
    expect(extra.status).toBe(201);
    expect(await json(extra)).not.toHaveProperty('colour');
    const created = await createSubscription({ url: 'http://127.0.0.1:9/c', events: ['report.created'] });
    const both = await send(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey, 'PATCH', {
      rotateSecret: true,
      secret: '0123456789abcdef0123',
    });
    expect(both.status).toBe(400);
    expect((await send('/webhooks/subscriptions/not-a-uuid', tenant.tenantKey, 'PATCH', {})).status).toBe(400);
  });

  it('refuses private, loopback and link-local targets unless the deployment allows them', async () => {
    const refused = [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'http://10.1.2.3/hook',
      'http://192.168.1.10/hook',
      'http://172.20.0.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/hook',
      'http://[fe80::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://2130706433/hook',
      'http://0.0.0.0/hook',
    ];
    for (const url of refused) {
      const response = await send(
        '/webhooks/subscriptions',
        tenant.tenantKey,
        'POST',
        { url, events: ['report.created'] },
        strictApi,
      );
      const body = await json(response);
      expect(response.status, url).toBe(400);
      expect(body).toMatchObject({ code: 'private_webhook_target' });
      expect(body.error).toMatch(/^invalid body field url: host .* (private|loopback|link-local)/);
    }
    const unresolvable = await send(
      '/webhooks/subscriptions',
      tenant.tenantKey,
      'POST',
      { url: 'https://no-such-host.invalid/hook', events: ['report.created'] },
      strictApi,
    );
    expect(unresolvable.status).toBe(400);
    expect((await json(unresolvable)).error).toMatch(/does not resolve/);

    const publicTarget = await send(
      '/webhooks/subscriptions',
      tenant.tenantKey,
      'POST',
      { url: 'https://93.184.215.14/hook', events: ['report.created'] },
      strictApi,
    );
    expect(publicTarget.status).toBe(201);
    const created = await json(publicTarget);
    const moved = await send(
      `/webhooks/subscriptions/${created.id}`,
      tenant.tenantKey,
      'PATCH',
      { url: 'http://169.254.169.254/' },
      strictApi,
    );
    expect(moved.status).toBe(400);
    await send(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey, 'DELETE');
  });

  it('is for tenant-wide keys only: customer keys get 403, other tenants see nothing', async () => {
    const created = await createSubscription({ url: 'http://127.0.0.1:9/scoped', events: ['report.created'] });
    const customer = tenant.customerKeys.Acme!;
    for (const [method, path] of [
      ['GET', '/webhooks/subscriptions'],
      ['POST', '/webhooks/subscriptions'],
      ['GET', `/webhooks/subscriptions/${created.id}`],
      ['PATCH', `/webhooks/subscriptions/${created.id}`],
      ['DELETE', `/webhooks/subscriptions/${created.id}`],
      ['POST', `/webhooks/subscriptions/${created.id}/test`],
      ['GET', '/webhooks/deliveries'],
    ] as const) {
      const response = await send(path, customer, method, method === 'GET' || method === 'DELETE' ? undefined : {});
      expect(response.status, `${method} ${path}`).toBe(403);
      expect(await json(response)).toMatchObject({ code: 'tenant_key_required' });
    }
    expect((await api.external('/webhooks/subscriptions', null)).status).toBe(401);

    const foreign = other.tenantKey;
    expect((await json(await api.external('/webhooks/subscriptions', foreign))).items).toEqual([]);
    expect((await api.external(`/webhooks/subscriptions/${created.id}`, foreign)).status).toBe(404);
    expect((await send(`/webhooks/subscriptions/${created.id}`, foreign, 'PATCH', { enabled: false })).status).toBe(
      404,
    );
    expect((await send(`/webhooks/subscriptions/${created.id}`, foreign, 'DELETE')).status).toBe(404);
    expect((await send(`/webhooks/subscriptions/${created.id}/test`, foreign, 'POST')).status).toBe(404);
    const still = await json(await api.external(`/webhooks/subscriptions/${created.id}`, tenant.tenantKey));
    expect(still.enabled).toBe(true);
  });
});

describe('delivery log', () => {
  it('lists deliveries newest first with the spec fields, filtered by webhookId, eventType, status and range, paged', async () => {
    const fresh = await createTenantWithKeys(db.pool, [], 'Log tenant');
    const key = fresh.tenantKey;
    const a = await createSubscription(
      { url: 'http://127.0.0.1:9/log-a', events: ['service_request.created', 'service_request.updated'] },
      key,
    );
    const b = await createSubscription({ url: 'http://127.0.0.1:9/log-b', events: ['service_request.created'] }, key);
    const entityId = '7f3c1d2e-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
    await produceEvent(
      db.pool,
      fresh.tenantId,
      'service_request.created',
      { id: entityId, title: 'Leak' },
      entityId,
      5,
    );
    await produceEvent(
      db.pool,
      fresh.tenantId,
      'service_request.updated',
      { id: entityId, title: 'Leak' },
      entityId,
      5,
    );
    await produceEvent(db.pool, fresh.tenantId, 'report.created', { id: entityId }, entityId, 5); // nobody subscribed

    const all = await json(await api.external('/webhooks/deliveries', key));
    expect(all.paging).toEqual({ limit: 100, offset: 0 });
    expect(all.items).toHaveLength(3);
    expect(all.items[0]).toEqual({
      id: expect.any(String),
      webhookId: a.id,
      url: 'http://127.0.0.1:9/log-a',
      eventType: 'service_request.updated',
      entityType: 'service_request',
      status: 'pending',
      error: '',
      entityId,
      httpStatus: null,
      attemptCount: 0,
      maxAttempts: 5,
      createdAt: expect.stringMatching(/Z$/),
      deliveredAt: null,
      lastAttemptAt: null,
      nextAttemptAt: expect.stringMatching(/Z$/),
    });

    const ofB = await json(await api.external(`/webhooks/deliveries?webhookId=${b.id}`, key));
    expect(ofB.items.map((item: { webhookId: string }) => item.webhookId)).toEqual([b.id]);
    const created = await json(await api.external('/webhooks/deliveries?eventType=service_request.created', key));
    expect(created.items).toHaveLength(2);
    expect((await json(await api.external('/webhooks/deliveries?status=delivered', key))).items).toEqual([]);
    expect((await json(await api.external('/webhooks/deliveries?status=pending', key))).items).toHaveLength(3);
    const page = await json(await api.external('/webhooks/deliveries?limit=2&offset=2', key));
    expect(page).toMatchObject({ paging: { limit: 2, offset: 2 } });
    expect(page.items).toHaveLength(1);
    expect((await json(await api.external('/webhooks/deliveries?from=2000-01-01&to=2000-01-31', key))).items).toEqual(
      [],
    );
    const today = new Date().toISOString().slice(0, 10);
    expect((await json(await api.external(`/webhooks/deliveries?from=${today}&to=${today}`, key))).items).toHaveLength(
      3,
    );
    expect((await json(await api.external('/webhooks/deliveries', other.tenantKey))).items).toEqual([]);

    const detail = await json(await api.external(`/webhooks/deliveries/${all.items[0].id}`, key));
    expect(detail.payload).toMatchObject({
      event: 'service_request.updated',
      entityType: 'service_request',
      entityId,
      tenantId: fresh.tenantId,
      data: { title: 'Leak' },
    });
    expect(detail.attempts).toEqual([]);
  });

  it('refuses bad filters with 400 naming the parameter', async () => {
    for (const [query, message] of [
      ['status=done', /status: must be one of pending, retrying, delivered, failed/],
      ['eventType=report.deleted', /eventType: must be one of/],
      ['webhookId=abc', /webhookId: must be a UUID/],
      ['limit=501', /limit/],
      ['from=2026-02-30', /from/],
      ['from=2026-03-02&to=2026-03-01', /from must be before to/],
    ] as const) {
      const response = await api.external(`/webhooks/deliveries?${query}`, tenant.tenantKey);
      expect(response.status, query).toBe(400);
      expect((await json(response)).error).toMatch(message);
    }
    expect(
      (await api.external('/webhooks/deliveries/3b0c8c1e-0000-4000-8000-000000000000', tenant.tenantKey)).status,
    ).toBe(404);
    expect(
      (await send('/webhooks/deliveries/3b0c8c1e-0000-4000-8000-000000000000/redeliver', tenant.tenantKey, 'POST'))
        .status,
    ).toBe(404);
  });

  it('disabling a subscription fails its pending deliveries; redelivery waits until it is enabled again', async () => {
    const fresh = await createTenantWithKeys(db.pool, [], 'Disable tenant');
    const sub = await createSubscription({ url: 'http://127.0.0.1:9/d', events: ['report.created'] }, fresh.tenantKey);
    await produceEvent(db.pool, fresh.tenantId, 'report.created', { id: 'r1' });
    await send(`/webhooks/subscriptions/${sub.id}`, fresh.tenantKey, 'PATCH', { enabled: false });
    const [delivery] = (await json(await api.external('/webhooks/deliveries', fresh.tenantKey))).items;
    expect(delivery).toMatchObject({ status: 'failed', error: 'subscription disabled', nextAttemptAt: null });

    const refused = await send(`/webhooks/deliveries/${delivery.id}/redeliver`, fresh.tenantKey, 'POST');
    expect(refused.status).toBe(409);
    expect(await json(refused)).toMatchObject({ code: 'subscription_disabled' });

    await send(`/webhooks/subscriptions/${sub.id}`, fresh.tenantKey, 'PATCH', { enabled: true });
    const queued = await send(`/webhooks/deliveries/${delivery.id}/redeliver`, fresh.tenantKey, 'POST');
    expect(queued.status).toBe(202);
    // No attempt was made, so the fresh budget is the configured 5 attempts.
    expect(await json(queued)).toMatchObject({ id: delivery.id, status: 'pending', attemptCount: 0, maxAttempts: 5 });

    await send(`/webhooks/subscriptions/${sub.id}`, fresh.tenantKey, 'DELETE');
    const afterDelete = await json(await api.external(`/webhooks/deliveries/${delivery.id}`, fresh.tenantKey));
    expect(afterDelete).toMatchObject({ status: 'failed', error: 'subscription deleted', webhookId: sub.id });
    expect((await send(`/webhooks/deliveries/${delivery.id}/redeliver`, fresh.tenantKey, 'POST')).status).toBe(409);
  });

  it('a subscription only receives the events it subscribed to, and only while enabled', async () => {
    const fresh = await createTenantWithKeys(db.pool, [], 'Fan-out tenant');
    const reports = await createSubscription(
      { url: 'http://127.0.0.1:9/r', events: ['report.created'] },
      fresh.tenantKey,
    );
    await createSubscription(
      { url: 'http://127.0.0.1:9/off', events: ['report.created'], enabled: false },
      fresh.tenantKey,
    );
    await createSubscription({ url: 'http://127.0.0.1:9/sr', events: ['service_request.created'] }, fresh.tenantKey);
    const { deliveries } = await produceEvent(db.pool, fresh.tenantId, 'report.created', { id: 'r2' });
    expect(deliveries).toBe(1);
    const items = (await json(await api.external('/webhooks/deliveries', fresh.tenantKey))).items;
    expect(items.map((item: { webhookId: string }) => item.webhookId)).toEqual([reports.id]);
    expect(webhookEventTypes).toContain(items[0].eventType);
  });
});
