import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTenantWithKeys } from '../support/fixtures.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.ts';
import { produceEvent, startDeliveryLoop } from './helpers.ts';

// A receiver that never answers must cost its own subscription's slots only. The
// worker here has 4 slots, at most 2 per subscription, and a 60 s timeout, so any
// head-of-line blocking would hold the healthy subscription for a minute and fail
// the wait below.

let db: TestDatabase;
let api: TestApi;
let worker: ReturnType<typeof startDeliveryLoop>;
let hanging: WebhookReceiver;
let healthy: WebhookReceiver;

beforeAll(async () => {
  db = await createTestDatabase('webhook_isolation');
  api = await startTestApi(db.pool, db.url, {
    GANTRY_WEBHOOK_CONCURRENCY: '4',
    GANTRY_WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: '2',
    GANTRY_WEBHOOK_TIMEOUT_SECONDS: '60',
    GANTRY_WEBHOOK_BACKOFF_SECONDS: '1',
    GANTRY_WORKER_POLL_MS: '50',
  });
  hanging = await startWebhookReceiver();
  healthy = await startWebhookReceiver();
});
afterAll(async () => {
  // Closing the hanging receiver ends its held requests, so the worker stops promptly.
  await hanging?.close();
  await worker?.stop();
  await healthy?.close();
  await api?.close();
  await db?.drop();
});

async function subscribe(key: string, url: string, events: string[]) {
  const response = await api.external('/webhooks/subscriptions', key, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ url, events }),
  });
  expect(response.status).toBe(201);
  return json(response);
}

describe('a slow or dead receiver', () => {
  it('never holds up another subscription: the healthy one gets every event while the hanging one still holds its requests', async () => {
    hanging.respond(() => 'hang');
    const dead = await startWebhookReceiver();
    const deadUrl = dead.url;
    await dead.close();

    const tenant = await createTenantWithKeys(db.pool, [], 'Isolation tenant');
    await subscribe(tenant.tenantKey, hanging.url, ['report.created']);
    await subscribe(tenant.tenantKey, deadUrl, ['inspection.completed']);
    await subscribe(tenant.tenantKey, healthy.url, ['service_request.created']);
    // The hanging and dead subscriptions' events are older, so they are first in line.
    for (let i = 0; i < 6; i += 1) await produceEvent(db.pool, tenant.tenantId, 'report.created', { n: i });
    for (let i = 0; i < 6; i += 1) await produceEvent(db.pool, tenant.tenantId, 'inspection.completed', { n: i });
    for (let i = 0; i < 6; i += 1) await produceEvent(db.pool, tenant.tenantId, 'service_request.created', { n: i });

    worker = startDeliveryLoop(db.pool, api.config);
    await hanging.waitFor('two held requests', () => hanging.held() === 2);
    await healthy.waitFor('all six healthy deliveries', (requests) => requests.length === 6, 20_000);

    expect(new Set(healthy.requests.map((request) => request.json.data.n))).toEqual(new Set([0, 1, 2, 3, 4, 5]));
    // The hanging subscription holds exactly its cap, first attempts only, unanswered.
    expect(hanging.held()).toBe(2);
    expect(hanging.requests).toHaveLength(2);
    expect(hanging.requests.every((request) => request.answeredStatus === null)).toBe(true);

    // The API answers meanwhile, and the log shows the healthy deliveries done.
    const delivered = await api.external('/webhooks/deliveries?eventType=service_request.created', tenant.tenantKey);
    expect(delivered.status).toBe(200);

    // Once the hanging receiver answers, its remaining deliveries follow.
    hanging.respond(() => ({ status: 200 }));
    hanging.release(200);
    await hanging.waitFor(
      'all six deliveries of the slow receiver',
      (requests) => requests.filter((r) => r.answeredStatus === 200).length === 6,
    );
  });
});
