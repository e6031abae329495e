import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createRequest, outboxEvents, startWorld, type Body, type ServiceRequestWorld } from './support.ts';

let world: ServiceRequestWorld;
let tenantKey: string;
let otherKey: string;
/** A second API on the same database: another process as far as idempotency is concerned. */
let secondApi: TestApi;

beforeAll(async () => {
  world = await startWorld('service_request_idempotency', ['Acme']);
  tenantKey = world.tenant.tenantKey;
  otherKey = world.tenant.customerKeys.Acme!;
  secondApi = await startTestApi(world.db.pool, world.db.url, {
    GANTRY_DATA_DIR: world.dataDir,
    GANTRY_RATE_LIMIT_PER_SECOND: '10000',
    GANTRY_RATE_LIMIT_BURST: '10000',
  });
});
afterAll(async () => {
  await secondApi?.close();
  await world?.close();
});

async function send(api: TestApi, key: string, method: string, path: string, body: string, idempotencyKey?: string) {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (idempotencyKey !== undefined) headers['Idempotency-Key'] = idempotencyKey;
  const response = await api.external(path, key, { method, headers, body });
  return {
    status: response.status,
    body: (await json(response)) as Body,
    replayed: response.headers.get('idempotent-replayed'),
  };
}

async function countByTitle(title: string): Promise<number> {
  const { rows } = await world.db.pool.query('SELECT count(*)::int AS n FROM service_requests WHERE title = $1', [
    title,
  ]);
  return rows[0].n as number;
}

/** Waits (by polling the database, not by time) until the key's claim is visible as in flight. */
async function untilInFlight(idempotencyKey: string): Promise<void> {
  for (;;) {
    const { rows } = await world.db.pool.query('SELECT state FROM idempotency_keys WHERE idempotency_key = $1', [
      idempotencyKey,
    ]);
    if (rows[0]?.state === 'in_flight') return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('Idempotency-Key', () => {
  it('replays the stored answer to a repeated create, with Idempotent-Replayed: true, creating one request and one event', async () => {
    const first = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Idempotent create', priority: 'high' }),
      'create-1',
    );
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();

    // The same body with other key order and spacing is the same request, also on another API process.
    const again = await send(
      secondApi,
      tenantKey,
      'POST',
      '/service-requests',
      '{ "priority": "high",  "title": "Idempotent create" }',
      'create-1',
    );
    expect(again.status).toBe(201);
    expect(again.replayed).toBe('true');
    expect(again.body).toEqual(first.body);

    expect(await countByTitle('Idempotent create')).toBe(1);
    expect((await outboxEvents(world, first.body.id)).map((event) => event.event_type)).toEqual([
      'service_request.created',
    ]);
  });

  it('answers 422 when the key comes back with a different body or for another operation, and changes nothing', async () => {
    const first = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Original body' }),
      'create-2',
    );
    expect(first.status).toBe(201);
    const different = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Another body' }),
      'create-2',
    );
    expect(different.status).toBe(422);
    expect(different.body).toMatchObject({ code: 'idempotency_key_reused' });
    const otherOperation = await send(
      world.api,
      tenantKey,
      'PATCH',
      `/service-requests/${first.body.id}`,
      JSON.stringify({ title: 'Original body' }),
      'create-2',
    );
    expect(otherOperation.status).toBe(422);
    expect(await countByTitle('Another body')).toBe(0);
    expect(await outboxEvents(world, first.body.id)).toHaveLength(1);
  });

  it('remembers keys per API key: another key may use the same Idempotency-Key for its own request', async () => {
    const mine = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Per key' }),
      'shared-key',
    );
    const theirs = await send(
      world.api,
      otherKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Per key' }),
      'shared-key',
    );
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.replayed).toBeNull();
    expect(theirs.body.id).not.toBe(mine.body.id);
    expect(theirs.body.customerName).toBe('Acme');
  });

  it('replays a PATCH without applying it twice', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Patch once' });
    const path = `/service-requests/${created.id}`;
    const body = JSON.stringify({ status: 'triaged', comment: 'Looked at it' });
    const first = await send(world.api, tenantKey, 'PATCH', path, body, 'patch-1');
    expect(first.status).toBe(200);
    const again = await send(world.api, tenantKey, 'PATCH', path, body, 'patch-1');
    expect(again).toMatchObject({ status: 200, replayed: 'true' });
    expect(again.body).toEqual(first.body);
    const current = await json(await world.api.external(path, tenantKey));
    expect(current.history.map((entry: Body) => entry.type)).toEqual(['created', 'status_changed', 'comment']);
    expect((await outboxEvents(world, created.id)).map((event) => event.event_type)).toEqual([
      'service_request.created',
      'service_request.updated',
    ]);
  });

  it('replays a cancel, which is answered once and cancelled once', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Cancel once' });
    const path = `/service-requests/${created.id}/cancel`;
    const first = await send(world.api, tenantKey, 'POST', path, JSON.stringify({ reason: 'Not needed' }), 'cancel-1');
    const again = await send(world.api, tenantKey, 'POST', path, JSON.stringify({ reason: 'Not needed' }), 'cancel-1');
    expect(first).toMatchObject({ status: 200, body: { id: created.id, cancelled: true } });
    expect(again).toMatchObject({ status: 200, replayed: 'true', body: { id: created.id, cancelled: true } });
    // Without the key, a second cancel is the 409 of the status rules.
    expect((await send(world.api, tenantKey, 'POST', path, JSON.stringify({ reason: 'Not needed' }))).status).toBe(409);
    expect(
      (await outboxEvents(world, created.id)).filter((event) => event.event_type === 'service_request.cancelled'),
    ).toHaveLength(1);
  });

  it('does not remember a failed request: the key can be used again once the body is fixed', async () => {
    const refused = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Fixed later', status: 'cancelled' }),
      'retry-1',
    );
    expect(refused.status).toBe(400);
    const fixed = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Fixed later' }),
      'retry-1',
    );
    expect(fixed.status).toBe(201);
    expect(fixed.replayed).toBeNull();
  });

  it('answers 409 while a request with the same key is still in flight, in any API process, then replays its answer', async () => {
    await createRequest(world, tenantKey, { title: 'makes sure the tenant counter row exists' });
    // Hold the tenant's display-code counter so the first create stays in flight.
    const blocker = await world.db.pool.connect();
    let first: Promise<Awaited<ReturnType<typeof send>>>;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT * FROM service_request_counters WHERE tenant_id = $1 FOR UPDATE', [
        world.tenant.tenantId,
      ]);
      first = send(
        world.api,
        tenantKey,
        'POST',
        '/service-requests',
        JSON.stringify({ title: 'Slow create' }),
        'concurrent-1',
      );
      await untilInFlight('concurrent-1');

      const meanwhile = await send(
        secondApi,
        tenantKey,
        'POST',
        '/service-requests',
        JSON.stringify({ title: 'Slow create' }),
        'concurrent-1',
      );
      expect(meanwhile.status).toBe(409);
      expect(meanwhile.body).toMatchObject({ code: 'idempotency_in_flight' });
      const differentMeanwhile = await send(
        secondApi,
        tenantKey,
        'POST',
        '/service-requests',
        JSON.stringify({ title: 'Other' }),
        'concurrent-1',
      );
      expect(differentMeanwhile.status).toBe(422);
    } finally {
      await blocker.query('COMMIT');
      blocker.release();
    }
    const answered = await first;
    expect(answered.status).toBe(201);
    const replay = await send(
      secondApi,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Slow create' }),
      'concurrent-1',
    );
    expect(replay).toMatchObject({ status: 201, replayed: 'true' });
    expect(replay.body.id).toBe(answered.body.id);
    expect(await countByTitle('Slow create')).toBe(1);
    expect(await outboxEvents(world, answered.body.id)).toHaveLength(1);
  });

  it('forgets a key after 24 hours and lets a retry take over a claim abandoned by a crashed process', async () => {
    const first = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Day one' }),
      'expiring',
    );
    expect(first.status).toBe(201);
    const remembered = await world.db.pool.query(
      "SELECT extract(epoch FROM expires_at - created_at)::int AS kept FROM idempotency_keys WHERE idempotency_key = 'expiring'",
    );
    expect(remembered.rows[0].kept).toBe(24 * 3600);
    await world.db.pool.query(
      "UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = 'expiring'",
    );
    const later = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'Day two' }),
      'expiring',
    );
    expect(later.status).toBe(201);
    expect(later.replayed).toBeNull();

    // A claim left in flight long ago by a process that died: a retry takes it over.
    const body = JSON.stringify({ title: 'After a crash' });
    await send(world.api, tenantKey, 'POST', '/service-requests', body, 'crashed');
    await world.db.pool.query(
      "UPDATE idempotency_keys SET state = 'in_flight', response_status = NULL, response_body = NULL, created_at = now() - interval '10 minutes' WHERE idempotency_key = 'crashed'",
    );
    const retried = await send(world.api, tenantKey, 'POST', '/service-requests', body, 'crashed');
    expect(retried.status).toBe(201);
    expect(retried.replayed).toBeNull();
  });

  it('refuses a malformed Idempotency-Key with 400', async () => {
    const tooLong = await send(
      world.api,
      tenantKey,
      'POST',
      '/service-requests',
      JSON.stringify({ title: 'x' }),
      'k'.repeat(256),
    );
    expect(tooLong.status).toBe(400);
    // Declared headers are validated at the edge like query parameters, naming the header.
    expect(tooLong.body).toMatchObject({ code: 'invalid_header' });
    expect(tooLong.body.error).toMatch(/Idempotency-Key/);
    expect(await countByTitle('x')).toBe(0);
  });
});
