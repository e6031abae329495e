import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../support/webhook-receiver.ts';
import { fastWebhookEnv, produceEvent, startDeliveryLoop, waitForDeliveries } from './helpers.ts';

let db: TestDatabase;
let api: TestApi;
let worker: ReturnType<typeof startDeliveryLoop>;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  db = await createTestDatabase('webhook_delivery');
  api = await startTestApi(db.pool, db.url, fastWebhookEnv);
  worker = startDeliveryLoop(db.pool, api.config);
});
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.close();
});
afterAll(async () => {
  await worker?.stop();
  await api?.close();
  await db?.drop();
});

async function receiver(): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver();
  receivers.push(started);
  return started;
}

async function subscribe(tenant: TenantFixture, url: string, events: string[], extra: Record<string, unknown> = {}) {
  const response = await api.external('/webhooks/subscriptions', tenant.tenantKey, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ url, events, ...extra }),
  });
  const body = await json(response);
  expect(response.status, JSON.stringify(body)).toBe(201);
  return body as { id: string; secret: string | null };
}

/** Verifies a request the way an integrator would: HMAC-SHA256 of the raw bytes with the secret. */
function signatureValid(request: ReceivedWebhook, secret: string): boolean {
  const header = String(request.headers['x-service-signature'] ?? '');
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(request.body).digest('hex')}`);
  return header.length === expected.length && timingSafeEqual(Buffer.from(header), expected);
}

async function deliveriesOf(tenant: TenantFixture, query = '') {
  return (await json(await api.external(`/webhooks/deliveries${query}`, tenant.tenantKey))).items as any[];
}

describe('webhook delivery to a real receiver', () => {
  it('POSTs the exact payload of a produced event, signed with the secret, with every contract header', async () => {
    const hook = await receiver();
    const tenant = await createTenantWithKeys(db.pool, [], 'Signed tenant');
    const subscription = await subscribe(tenant, hook.url, ['inspection.completed', 'report.created']);

    // A real producer: the admin API writes the inspection and its outbox event in one transaction.
    const base = `/tenants/${tenant.tenantId}`;
    await api.admin(`${base}/asset-types`, { method: 'POST', json: { name: 'Straddle carrier' } });
    const asset = await json(
      await api.admin(`${base}/assets`, {
        method: 'POST',
        json: { name: 'SC 7', identifier: 'SC-7', customerName: 'Acme', assetType: 'Straddle carrier' },
      }),
    );
    const inspection = await json(
      await api.admin(`${base}/inspections`, {
        method: 'POST',
        json: { assetId: asset.id, completedAt: '2026-10-01T08:00:00Z' },
      }),
    );
    expect(inspection.id).toBeDefined();

    await hook.waitFor('the inspection.completed delivery', (requests) => requests.length >= 1);
    const request = hook.requests[0]!;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/hooks');
    expect(request.headers['content-type']).toBe('application/json');
    expect(signatureValid(request, subscription.secret!)).toBe(true);
    expect(request.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(request.headers['x-service-webhook-attempt']).toBe('1');
    const timestamp = String(request.headers['x-service-webhook-timestamp']);
    expect(timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);

    expect(Object.keys(request.json)).toEqual(['event', 'entityType', 'entityId', 'tenantId', 'createdAt', 'data']);
    expect(request.json).toMatchObject({
      event: 'inspection.completed',
      entityType: 'inspection',
      entityId: inspection.id,
      tenantId: tenant.tenantId,
      data: {
        id: inspection.id,
        assetId: asset.id,
        customerName: 'Acme',
        status: 'completed',
        completedAt: '2026-10-01T08:00:00.000Z',
      },
    });
    expect(request.json.createdAt).toMatch(/Z$/);

    const [delivery] = await deliveriesOf(tenant);
    expect(request.headers['x-service-webhook-id']).toBe(delivery.id);
    await waitForDeliveries(db.pool, 'delivered', (rows) =>
      rows.some((row) => row.id === delivery.id && row.status === 'delivered'),
    );
    const logged = (await deliveriesOf(tenant))[0];
    expect(logged).toMatchObject({
      status: 'delivered',
      httpStatus: 200,
      attemptCount: 1,
      error: '',
      nextAttemptAt: null,
      url: hook.url,
    });
    expect(logged.deliveredAt).not.toBeNull();
    expect(logged.lastAttemptAt).toBe(new Date(timestamp).toISOString());

    // The signed bytes are what the delivery stores: the detail view shows the same payload.
    const detail = await json(await api.external(`/webhooks/deliveries/${delivery.id}`, tenant.tenantKey));
    expect(detail.payload).toEqual(request.json);
    expect(detail.attempts).toEqual([
      { attempt: 1, startedAt: logged.lastAttemptAt, durationMs: expect.any(Number), httpStatus: 200, error: '' },
    ]);
  });

  it('delivers service_request.created from the service request API with the fields the spec names in data', async () => {
    const hook = await receiver();
    const tenant = await createTenantWithKeys(db.pool, [], 'Service request tenant');
    const subscription = await subscribe(tenant, hook.url, ['service_request.created']);
    const created = await api.external('/service-requests', tenant.tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: 'Spreader twistlock jammed', priority: 'urgent', customerName: 'Acme' }),
    });
    expect(created.status).toBe(201);
    const request = await json(created);
    await hook.waitFor('the service_request.created delivery', (requests) => requests.length === 1);
    const delivered = hook.requests[0]!;
    expect(signatureValid(delivered, subscription.secret!)).toBe(true);
    expect(delivered.json).toMatchObject({
      event: 'service_request.created',
      entityType: 'service_request',
      entityId: request.id,
      tenantId: tenant.tenantId,
      data: {
        id: request.id,
        title: 'Spreader twistlock jammed',
        status: 'new',
        priority: 'urgent',
        customerName: 'Acme',
      },
    });
  });

  it('sends no signature header when the subscription has no secret', async () => {
    const hook = await receiver();
    const tenant = await createTenantWithKeys(db.pool, [], 'Unsigned tenant');
    await subscribe(tenant, hook.url, ['report.created'], { secret: null });
    await produceEvent(db.pool, tenant.tenantId, 'report.created', { id: 'unsigned' });
    await hook.waitFor('one delivery', (requests) => requests.length === 1);
    expect(hook.requests[0]!.headers['x-service-signature']).toBeUndefined();
    expect(hook.requests[0]!.headers['x-service-webhook-id']).toBeDefined();
  });

  it('retries a 500 after the backoff with the same id and body and the next attempt number, then records success', async () => {
    const hook = await receiver();
    hook.respond((_request, index) => (index < 2 ? { status: 500, body: 'database down' } : { status: 204 }));
    const tenant = await createTenantWithKeys(db.pool, [], 'Retry tenant');
    const subscription = await subscribe(tenant, hook.url, ['service_request.created']);
    await produceEvent(db.pool, tenant.tenantId, 'service_request.created', {
      id: 'sr-1',
      title: 'Leak',
      status: 'new',
      priority: 'high',
      customerName: 'Acme',
    });

    await hook.waitFor('three attempts', (requests) => requests.length === 3);
    const ids = new Set(hook.requests.map((request) => request.headers['x-service-webhook-id']));
    expect(ids.size).toBe(1);
    expect(hook.requests.map((request) => request.headers['x-service-webhook-attempt'])).toEqual(['1', '2', '3']);
    expect(new Set(hook.requests.map((request) => request.body.toString('hex'))).size).toBe(1);
    for (const request of hook.requests) expect(signatureValid(request, subscription.secret!)).toBe(true);
    const timestamps = hook.requests.map((request) =>
      Date.parse(String(request.headers['x-service-webhook-timestamp'])),
    );
    // The configured backoff (1 s) separates attempts.
    expect(timestamps[1]! - timestamps[0]!).toBeGreaterThanOrEqual(1000);
    expect(timestamps[2]! - timestamps[1]!).toBeGreaterThanOrEqual(1000);

    const [deliveryId] = [...ids] as string[];
    await waitForDeliveries(db.pool, 'delivered', (rows) =>
      rows.some((row) => row.id === deliveryId && row.status === 'delivered'),
    );
    const detail = await json(await api.external(`/webhooks/deliveries/${deliveryId}`, tenant.tenantKey));
    expect(detail).toMatchObject({ status: 'delivered', httpStatus: 204, attemptCount: 3, maxAttempts: 3, error: '' });
    expect(detail.attempts.map((attempt: any) => [attempt.attempt, attempt.httpStatus, attempt.error])).toEqual([
      [1, 500, 'HTTP 500: database down'],
      [2, 500, 'HTTP 500: database down'],
      [3, 204, ''],
    ]);
  });

  it('gives up after the last attempt: failed, with the last error, status and no next attempt', async () => {
    const hook = await receiver();
    hook.respond(() => ({ status: 503 }));
    const tenant = await createTenantWithKeys(db.pool, [], 'Failing tenant');
    await subscribe(tenant, hook.url, ['report.created']);
    await produceEvent(db.pool, tenant.tenantId, 'report.created', { id: 'r-fail' });
    await hook.waitFor('three attempts', (requests) => requests.length === 3);
    const [pending] = await deliveriesOf(tenant);
    await waitForDeliveries(db.pool, 'failed', (rows) =>
      rows.some((row) => row.id === pending.id && row.status === 'failed'),
    );
    const [failed] = await deliveriesOf(tenant, '?status=failed');
    expect(failed).toMatchObject({
      id: pending.id,
      status: 'failed',
      httpStatus: 503,
      attemptCount: 3,
      maxAttempts: 3,
      error: 'HTTP 503',
      nextAttemptAt: null,
      deliveredAt: null,
    });
    expect(hook.requests).toHaveLength(3);
  });

  it('treats a receiver that hangs past the timeout as a failed attempt and retries it', async () => {
    const hook = await receiver();
    hook.respond((_request, index) => (index === 0 ? 'hang' : { status: 200 }));
    const tenant = await createTenantWithKeys(db.pool, [], 'Hanging tenant');
    await subscribe(tenant, hook.url, ['telemetry.geofence_alert.opened']);
    await produceEvent(db.pool, tenant.tenantId, 'telemetry.geofence_alert.opened', { id: 'alert-1' });
    await hook.waitFor('the retry after the timeout', (requests) => requests.length === 2);
    const [delivery] = await deliveriesOf(tenant);
    await waitForDeliveries(db.pool, 'delivered', (rows) =>
      rows.some((row) => row.id === delivery.id && row.status === 'delivered'),
    );
    const detail = await json(await api.external(`/webhooks/deliveries/${delivery.id}`, tenant.tenantKey));
    expect(detail.attempts.map((attempt: any) => [attempt.attempt, attempt.httpStatus, attempt.error])).toEqual([
      [1, null, 'timed out after 2 s'],
      [2, 200, ''],
    ]);
    expect(hook.requests[0]!.headers['x-service-webhook-id']).toBe(hook.requests[1]!.headers['x-service-webhook-id']);
  });

  it('retries when the receiver is down (connection refused) and delivers once it is back', async () => {
    const dead = await startWebhookReceiver();
    const url = dead.url;
    await dead.close();
    const tenant = await createTenantWithKeys(db.pool, [], 'Down tenant');
    await subscribe(tenant, url, ['report.created']);
    await produceEvent(db.pool, tenant.tenantId, 'report.created', { id: 'r-down' });
    const [delivery] = await deliveriesOf(tenant);
    await waitForDeliveries(db.pool, 'failed', (rows) =>
      rows.some((row) => row.id === delivery.id && row.status === 'failed'),
    );
    const failed = await json(await api.external(`/webhooks/deliveries/${delivery.id}`, tenant.tenantKey));
    expect(failed).toMatchObject({ status: 'failed', httpStatus: null, error: 'connection refused', attemptCount: 3 });

    // Redelivery: same id, same body, attempt numbers continue, to the subscription's (new) URL.
    const hook = await receiver();
    const subscriptionId = failed.webhookId;
    await api.external(`/webhooks/subscriptions/${subscriptionId}`, tenant.tenantKey, {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: hook.url }),
    });
    const queued = await api.external(`/webhooks/deliveries/${delivery.id}/redeliver`, tenant.tenantKey, {
      method: 'POST',
    });
    expect(queued.status).toBe(202);
    expect(await json(queued)).toMatchObject({ id: delivery.id, status: 'pending', attemptCount: 3, maxAttempts: 6 });
    await hook.waitFor('the redelivery', (requests) => requests.length === 1);
    expect(hook.requests[0]!.headers['x-service-webhook-id']).toBe(delivery.id);
    expect(hook.requests[0]!.headers['x-service-webhook-attempt']).toBe('4');
    expect(hook.requests[0]!.json).toEqual(failed.payload);
    await waitForDeliveries(db.pool, 'delivered', (rows) =>
      rows.some((row) => row.id === delivery.id && row.status === 'delivered'),
    );
    expect((await deliveriesOf(tenant))[0]).toMatchObject({
      status: 'delivered',
      attemptCount: 4,
      url: hook.url,
      httpStatus: 200,
    });
  });

  it('redelivers a delivered delivery with the same id, so receivers can de-duplicate it', async () => {
    const hook = await receiver();
    const tenant = await createTenantWithKeys(db.pool, [], 'Redeliver tenant');
    await subscribe(tenant, hook.url, ['service_request.cancelled']);
    await produceEvent(db.pool, tenant.tenantId, 'service_request.cancelled', { id: 'sr-9' });
    await hook.waitFor('first delivery', (requests) => requests.length === 1);
    const [delivery] = await deliveriesOf(tenant);
    await waitForDeliveries(db.pool, 'delivered', (rows) =>
      rows.some((row) => row.id === delivery.id && row.status === 'delivered'),
    );
    expect(
      (await api.external(`/webhooks/deliveries/${delivery.id}/redeliver`, tenant.tenantKey, { method: 'POST' }))
        .status,
    ).toBe(202);
    await hook.waitFor('the redelivery', (requests) => requests.length === 2);
    expect(hook.requests[1]!.headers['x-service-webhook-id']).toBe(hook.requests[0]!.headers['x-service-webhook-id']);
    expect(hook.requests[1]!.body.equals(hook.requests[0]!.body)).toBe(true);
    expect(hook.requests[1]!.headers['x-service-webhook-attempt']).toBe('2');
  });

  it('sends a signed test event on demand, also to a disabled subscription', async () => {
    const hook = await receiver();
    const tenant = await createTenantWithKeys(db.pool, [], 'Test-event tenant');
    const subscription = await subscribe(tenant, hook.url, ['report.created'], { enabled: false, name: 'Staging' });
    const response = await api.external(`/webhooks/subscriptions/${subscription.id}/test`, tenant.tenantKey, {
      method: 'POST',
    });
    expect(response.status).toBe(202);
    const queued = await json(response);
    expect(queued).toMatchObject({
      webhookId: subscription.id,
      eventType: 'webhook.test',
      entityType: 'webhook_subscription',
      entityId: subscription.id,
      status: 'pending',
    });
    await hook.waitFor('the test event', (requests) => requests.length === 1);
    const request = hook.requests[0]!;
    expect(signatureValid(request, subscription.secret!)).toBe(true);
    expect(request.headers['x-service-webhook-id']).toBe(queued.id);
    expect(request.json).toMatchObject({
      event: 'webhook.test',
      entityType: 'webhook_subscription',
      entityId: subscription.id,
      tenantId: tenant.tenantId,
      data: { subscriptionId: subscription.id, name: 'Staging', events: ['report.created'] },
    });
  });

  it('signs the next attempt with a rotated secret', async () => {
    const hook = await receiver();
    // The first attempt is held until the secret is rotated, then refused.
    hook.respond((_request, index) => (index === 0 ? 'hang' : { status: 200 }));
    const tenant = await createTenantWithKeys(db.pool, [], 'Rotation tenant');
    const subscription = await subscribe(tenant, hook.url, ['report.created']);
    await produceEvent(db.pool, tenant.tenantId, 'report.created', { id: 'r-rot' });
    await hook.waitFor('first attempt', (requests) => requests.length === 1);
    const rotated = await json(
      await api.external(`/webhooks/subscriptions/${subscription.id}`, tenant.tenantKey, {
        method: 'PATCH',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ rotateSecret: true }),
      }),
    );
    hook.release(401);
    await hook.waitFor('second attempt', (requests) => requests.length === 2);
    expect(signatureValid(hook.requests[0]!, subscription.secret!)).toBe(true);
    expect(signatureValid(hook.requests[1]!, rotated.secret)).toBe(true);
    expect(signatureValid(hook.requests[1]!, subscription.secret!)).toBe(false);
  });
});

describe('delivery metrics', () => {
  it('counts attempts by outcome and finished deliveries in the Prometheus registry', async () => {
    const metrics = await (await fetch(`${api.url}/metrics`)).text();
    expect(metrics).toMatch(/gantry_webhook_delivery_attempts_total\{outcome="success"\} [1-9]/);
    expect(metrics).toMatch(/gantry_webhook_delivery_attempts_total\{outcome="http_error"\} [1-9]/);
    expect(metrics).toMatch(/gantry_webhook_delivery_attempts_total\{outcome="timeout"\} [1-9]/);
    expect(metrics).toMatch(/gantry_webhook_deliveries_finished_total\{status="failed"\} [1-9]/);
    expect(metrics).toMatch(/gantry_webhook_delivery_attempt_duration_seconds_bucket/);
  });
});
