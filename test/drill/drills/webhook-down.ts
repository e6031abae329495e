import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '@gantry/config';
import { createTenantWithKeys } from '../../support/fixtures.ts';
import { spawnService } from '../../support/processes.ts';
import { createDrillDatabase } from '../database.ts';
import { signatureOf, startDrillReceiver } from '../receiver.ts';
import { fmt, type DrillContext } from '../report.ts';

/** Seconds the receiver is up before the outage and after it, while events keep coming. */
const UP_BEFORE_S = 20;
const UP_AFTER_S = 30;
/** One service request every this many ms; every third is also updated (a second event). */
const EVERY_MS = 2000;

interface DeliveryRow {
  id: string;
  event_id: string;
  status: string;
  attempt_count: number;
  body: string;
  event_at: Date;
}

interface AttemptRow {
  delivery_id: string;
  attempt: number;
  started_at: Date;
  http_status: number | null;
  error: string;
}

/**
 * webhook-down — the API and the worker as processes, a subscription to a real
 * loopback receiver with the default contract (3 attempts, backoff 15 s and 60 s, 10 s
 * timeout); service requests are created (and some updated) through the API every 2 s
 * while the receiver is up for 20 s, down (connection refused) for
 * DRILL_WEBHOOK_DOWN_SECONDS (120), and up again for 30 s. Afterwards every event
 * must be delivered exactly once with a 2xx at the receiver, or `failed` with its 3
 * attempts logged.
 */
export async function webhookDownDrill({ report, cleanup }: DrillContext): Promise<void> {
  const downSeconds = Number(process.env.DRILL_WEBHOOK_DOWN_SECONDS ?? 120);
  const db = await createDrillDatabase('webhook');
  cleanup.add(`database ${db.name}`, () => db.drop());
  const contract = loadConfig({ GANTRY_DATABASE_URL: db.url }).webhooks;
  const tenant = await createTenantWithKeys(db.pool, [], 'Drill webhooks');
  const receiver = await startDrillReceiver();
  cleanup.add('receiver', () => receiver.close());
  const env = { GANTRY_DATABASE_URL: db.url, GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
  const api = await spawnService('api', {
    env: { ...env, GANTRY_RATE_LIMIT_PER_SECOND: '1000', GANTRY_RATE_LIMIT_BURST: '1000' },
  });
  cleanup.add('api', () => api.kill());
  const worker = await spawnService('worker', { env });
  cleanup.add('worker', () => worker.kill());
  report.step(
    `database ${db.name}, API (pid ${api.pid}) and worker (pid ${worker.pid}) as processes; contract: ${contract.maxAttempts} attempts, backoff ${contract.backoffSeconds.join(', ')} s, timeout ${contract.timeoutSeconds} s`,
  );

  const call = async (method: string, path: string, body: unknown) => {
    const response = await fetch(`${api.url}/api/external/v1${path}`, {
      method,
      headers: { 'X-API-Key': tenant.tenantKey, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, json: (await response.json().catch(() => null)) as any };
  };
  const subscription = await call('POST', '/webhooks/subscriptions', {
    name: 'Drill receiver',
    url: receiver.url,
    events: ['service_request.created', 'service_request.updated'],
  });
  if (subscription.status !== 201)
    throw new Error(`creating the subscription answered ${subscription.status}: ${JSON.stringify(subscription.json)}`);
  const secret: string = subscription.json.secret;
  report.step(`subscription ${subscription.json.id} → ${receiver.url}`);

  const progress = async () => {
    const { rows } = await db.pool.query<{ status: string; count: number }>(
      `SELECT status, count(*)::int AS count FROM webhook_deliveries GROUP BY status`,
    );
    const byStatus = Object.fromEntries(rows.map((row) => [row.status, row.count]));
    return {
      events: rows.reduce((sum, row) => sum + row.count, 0),
      delivered: byStatus.delivered ?? 0,
      retrying: (byStatus.retrying ?? 0) + (byStatus.pending ?? 0),
      failed: byStatus.failed ?? 0,
      'receiver requests': receiver.requests.length,
    };
  };

  // The producer: a service request every EVERY_MS for the whole drill, through the API.
  let produced = 0;
  let refusedByApi = 0;
  let producing = true;
  const producer = (async () => {
    for (let n = 1; producing; n += 1) {
      const next = Date.now() + EVERY_MS;
      const created = await call('POST', '/service-requests', {
        title: `Drill request ${n}`,
        description: 'webhook-down drill',
      });
      if (created.status === 201) {
        produced += 1;
        if (n % 3 === 0) {
          const updated = await call('PATCH', `/service-requests/${created.json.id}`, { status: 'triaged' });
          if (updated.status === 200) produced += 1;
          else refusedByApi += 1;
        }
      } else refusedByApi += 1;
      await sleep(Math.max(0, next - Date.now()));
    }
  })();

  await sleep(UP_BEFORE_S * 1000);
  await receiver.down();
  const downAt = Date.now();
  report.step(`receiver DOWN (stops listening: connection refused) for ${downSeconds} s`, await progress());
  await sleep(downSeconds * 1000);
  await receiver.up();
  const upAt = Date.now();
  report.step('receiver UP again on the same port', await progress());
  await sleep(UP_AFTER_S * 1000);
  producing = false;
  await producer;
  report.step('events stopped', { 'API calls that raised an event': produced, 'API calls refused': refusedByApi });

  // Wait for the last retries: after the last event, at most every backoff plus every timeout.
  const bound =
    (contract.backoffSeconds.reduce((sum, value) => sum + value, 0) * 2 +
      contract.timeoutSeconds * contract.maxAttempts +
      120) *
    1000;
  const deadline = Date.now() + bound;
  let state = await progress();
  while (state.retrying > 0 && Date.now() < deadline) {
    await sleep(1000);
    state = await progress();
  }
  report.step('every delivery finished (delivered or failed)', state);
  const apiExit = await api.stop();
  const workerExit = await worker.stop();
  report.step('API and worker stopped with SIGTERM', {
    'api exit': String(apiExit.code ?? apiExit.signal),
    'worker exit': String(workerExit.code ?? workerExit.signal),
  });

  const { rows: events } = await db.pool.query<{ id: string; event_type: string; created_at: Date }>(
    `SELECT id, event_type, created_at FROM webhook_events WHERE tenant_id = $1`,
    [tenant.tenantId],
  );
  const { rows: deliveries } = await db.pool.query<DeliveryRow>(
    `SELECT d.id, d.event_id, d.status, d.attempt_count, d.body, e.created_at AS event_at
       FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.subscription_id = $1`,
    [subscription.json.id],
  );
  const { rows: attempts } = await db.pool.query<AttemptRow>(
    `SELECT a.delivery_id, a.attempt, a.started_at, a.http_status, a.error
       FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
      WHERE d.subscription_id = $1 ORDER BY a.delivery_id, a.started_at, a.id`,
    [subscription.json.id],
  );
  const attemptsOf = new Map<string, AttemptRow[]>();
  for (const attempt of attempts)
    attemptsOf.set(attempt.delivery_id, [...(attemptsOf.get(attempt.delivery_id) ?? []), attempt]);
  const accepted = new Map<string, number>();
  for (const request of receiver.requests)
    if (request.status >= 200 && request.status < 300) accepted.set(request.id, (accepted.get(request.id) ?? 0) + 1);

  const deliveriesByEvent = new Map<string, DeliveryRow[]>();
  for (const delivery of deliveries)
    deliveriesByEvent.set(delivery.event_id, [...(deliveriesByEvent.get(delivery.event_id) ?? []), delivery]);
  const withoutDelivery = events.filter((event) => !deliveriesByEvent.has(event.id)).length;
  const severalDeliveries = [...deliveriesByEvent.values()].filter((list) => list.length > 1).length;

  const delivered = deliveries.filter((delivery) => delivery.status === 'delivered');
  const failed = deliveries.filter((delivery) => delivery.status === 'failed');
  const unfinished = deliveries.filter((delivery) => delivery.status !== 'delivered' && delivery.status !== 'failed');
  const deliveredOk = delivered.filter((delivery) => accepted.get(delivery.id) === 1);
  const duplicates = [...accepted.values()].filter((times) => times > 1).length;
  const failedOk = failed.filter((delivery) => {
    const logged = attemptsOf.get(delivery.id) ?? [];
    return (
      delivery.attempt_count === contract.maxAttempts &&
      logged.length === contract.maxAttempts &&
      logged.every((attempt) => attempt.error !== '') &&
      !accepted.has(delivery.id)
    );
  });
  const lost = events.length - deliveredOk.length - failedOk.length;
  const unknownIds = [...accepted.keys()].filter((id) => !deliveries.some((delivery) => delivery.id === id)).length;

  const bodies = new Map(deliveries.map((delivery) => [delivery.id, delivery.body]));
  const badSignatures = receiver.requests.filter(
    (request) =>
      request.body !== bodies.get(request.id) || request.signature !== signatureOf(secret, request.body ?? ''),
  ).length;

  // Contract timing as a lower bound only: attempt n+1 never starts before backoff[n-1] after attempt n.
  let earlyRetries = 0;
  const gaps: number[][] = [];
  for (const logged of attemptsOf.values()) {
    const real = logged.filter((attempt) => !attempt.error.startsWith('interrupted'));
    for (let index = 1; index < real.length; index += 1) {
      const gap = (real[index]!.started_at.getTime() - real[index - 1]!.started_at.getTime()) / 1000;
      const backoff = contract.backoffSeconds[Math.min(index - 1, contract.backoffSeconds.length - 1)]!;
      const list = gaps[index - 1] ?? [];
      list.push(gap);
      gaps[index - 1] = list;
      if (gap < backoff) earlyRetries += 1;
    }
  }
  const refusedAttempts = attempts.filter((attempt) => /refused/.test(attempt.error)).length;
  const phase = (at: Date) => (at.getTime() < downAt ? 'before' : at.getTime() < upAt ? 'during' : 'after');
  const byPhase = (list: DeliveryRow[], name: string) =>
    list.filter((delivery) => phase(delivery.event_at) === name).length;
  const firstTry = delivered.filter((delivery) => delivery.attempt_count === 1).length;

  report.count('events produced (API calls)', produced);
  report.count('events in the outbox', events.length);
  report.count(
    'events before / during / after the outage',
    ['before', 'during', 'after']
      .map((name) => fmt(events.filter((event) => phase(event.created_at) === name).length))
      .join(' / '),
  );
  report.count('deliveries', deliveries.length);
  report.count(
    'delivered (first attempt / after retries)',
    `${fmt(delivered.length)} (${fmt(firstTry)} / ${fmt(delivered.length - firstTry)})`,
  );
  report.count('failed, 3 attempts logged', failedOk.length);
  report.count(
    'failed by when the event was raised (before / during / after)',
    ['before', 'during', 'after'].map((name) => fmt(byPhase(failed, name))).join(' / '),
  );
  report.count('still pending or retrying', unfinished.length);
  report.count(
    'receiver requests answered 2xx',
    [...accepted.values()].reduce((sum, times) => sum + times, 0),
  );
  report.count('attempts refused while down', refusedAttempts);
  for (const [index, list] of gaps.entries()) {
    report.count(
      `gap attempt ${index + 1} → ${index + 2} (min / max s)`,
      `${Math.min(...list).toFixed(1)} / ${Math.max(...list).toFixed(1)}`,
    );
  }
  report.count('duplicates at the receiver', duplicates);
  report.count('lost', lost);

  report.check(
    'the API took every request',
    refusedByApi === 0 && produced === events.length,
    `${fmt(produced)} events raised, ${refusedByApi} refused, ${fmt(events.length)} in the outbox`,
  );
  report.check(
    'each event has exactly one delivery',
    withoutDelivery === 0 && severalDeliveries === 0,
    `${withoutDelivery} without, ${severalDeliveries} with several`,
  );
  report.check(
    'every event delivered once or failed per the contract',
    lost === 0 && unfinished.length === 0,
    `${fmt(deliveredOk.length)} delivered with one 2xx, ${fmt(failedOk.length)} failed after ${contract.maxAttempts} logged attempts, lost ${lost}`,
  );
  report.check(
    'no duplicate at the receiver',
    duplicates === 0 && unknownIds === 0,
    `${duplicates} ids accepted twice, ${unknownIds} unknown ids`,
  );
  report.check(
    'bodies and signatures as stored',
    badSignatures === 0,
    `${badSignatures} of ${receiver.requests.length} requests differ`,
  );
  report.check('retries waited the contract’s backoff', earlyRetries === 0, `${earlyRetries} retries came early`);
  report.check('the outage was seen by the worker', refusedAttempts > 0, `${fmt(refusedAttempts)} attempts refused`);
}
