import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTenantWithKeys } from '../support/fixtures.ts';
import { nodeArguments, repoRoot } from '../support/processes.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.ts';
import { produceEvent, waitForDeliveries } from './helpers.ts';

// The worker as its own process (services/worker/dist/main.js), killed with SIGKILL
// while it holds deliveries in flight, then started again.

let db: TestDatabase;
let api: TestApi;
let hook: WebhookReceiver;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('webhook_durability');
  api = await startTestApi(db.pool, db.url);
  hook = await startWebhookReceiver();
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await hook?.close();
  await api?.close();
  await db?.drop();
});

function startWorkerProcess(): ChildProcess {
  const child = spawn(process.execPath, nodeArguments('worker'), {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH,
      GANTRY_DATABASE_URL: db.url,
      GANTRY_RUN_MIGRATIONS: 'false',
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      GANTRY_WEBHOOK_BACKOFF_SECONDS: '1,1',
      // Long enough that the kill always lands before an attempt times out; the lease
      // (timeout + 5 s) is how long the killed worker's deliveries wait to be taken over.
      GANTRY_WEBHOOK_TIMEOUT_SECONDS: '5',
      GANTRY_WORKER_POLL_MS: '100',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGKILL' && signal !== 'SIGTERM')
      console.error(`worker exited ${code ?? signal}: ${stderr}`);
  });
  children.push(child);
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
  });
}

describe('a worker killed mid-delivery', () => {
  it('delivers every event after a restart, each delivery id once with success and no delivery lost or duplicated', async () => {
    const tenant = await createTenantWithKeys(db.pool, [], 'Durability tenant');
    const response = await api.external('/webhooks/subscriptions', tenant.tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: hook.url, events: ['service_request.created'] }),
    });
    expect(response.status).toBe(201);

    // The receiver holds every request: the worker is mid-delivery when it dies.
    hook.respond(() => 'hang');
    for (let i = 0; i < 10; i += 1)
      await produceEvent(db.pool, tenant.tenantId, 'service_request.created', { n: i, phase: 'before kill' });

    const first = startWorkerProcess();
    // Four in flight: the default per-subscription cap.
    await hook.waitFor('four deliveries in flight', () => hook.held() === 4, 60_000);
    const interrupted = hook.requests.map((request) => String(request.headers['x-service-webhook-id']));
    first.kill('SIGKILL');
    await exited(first);
    await hook.waitFor('the killed worker’s connections to close', () => hook.held() === 0);

    // Events keep coming while no worker runs.
    for (let i = 10; i < 15; i += 1)
      await produceEvent(db.pool, tenant.tenantId, 'service_request.created', { n: i, phase: 'while down' });

    hook.respond(() => ({ status: 200 }));
    const second = startWorkerProcess();
    const rows = await waitForDeliveries(
      db.pool,
      'all fifteen delivered',
      (all) => all.length === 15 && all.every((row) => row.status === 'delivered'),
      60_000,
    );
    second.kill('SIGTERM');
    await exited(second);

    // Every event became exactly one delivery, and every delivery was accepted exactly once.
    const { rows: events } = await db.pool.query('SELECT id FROM webhook_events WHERE tenant_id = $1', [
      tenant.tenantId,
    ]);
    expect(events).toHaveLength(15);
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(15);
    const accepted = hook.requests.filter((request) => request.answeredStatus === 200);
    const acceptedIds = accepted.map((request) => String(request.headers['x-service-webhook-id']));
    expect(acceptedIds).toHaveLength(15);
    expect(new Set(acceptedIds)).toEqual(new Set(rows.map((row) => row.id)));
    expect(new Set(accepted.map((request) => request.json.data.n))).toEqual(new Set([...Array(15).keys()]));

    // The interrupted attempts were made again with the same id, body and attempt number.
    expect(interrupted).toHaveLength(4);
    for (const id of interrupted) {
      const sent = hook.requests.filter((request) => request.headers['x-service-webhook-id'] === id);
      expect(sent).toHaveLength(2);
      expect(sent[1]!.body.equals(sent[0]!.body)).toBe(true);
      expect(sent.map((request) => request.headers['x-service-webhook-attempt'])).toEqual(['1', '1']);
      const detail = await json(await api.external(`/webhooks/deliveries/${id}`, tenant.tenantKey));
      expect(detail).toMatchObject({ status: 'delivered', attemptCount: 1, httpStatus: 200 });
      expect(
        detail.attempts.map((attempt: any) => [attempt.attempt, attempt.httpStatus, attempt.error.split(':')[0]]),
      ).toEqual([
        [1, null, 'interrupted'],
        [1, 200, ''],
      ]);
    }
  });
});
