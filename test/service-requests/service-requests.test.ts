import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantWithKeys } from '../support/fixtures.ts';
import { json } from '../support/api.ts';
import {
  createAsset,
  createRequest,
  jsonInit,
  outboxEvents,
  patchRequest,
  startWorld,
  type Body,
  type ServiceRequestWorld,
} from './support.ts';

let world: ServiceRequestWorld;
let tenantKey: string;
let acmeKey: string;
let globexKey: string;

beforeAll(async () => {
  world = await startWorld('service_requests');
  tenantKey = world.tenant.tenantKey;
  acmeKey = world.tenant.customerKeys.Acme!;
  globexKey = world.tenant.customerKeys.Globex!;
});
afterAll(async () => {
  await world?.close();
});

async function post(key: string, body: unknown) {
  const response = await world.api.external('/service-requests', key, jsonInit('POST', body));
  return { status: response.status, body: (await json(response)) as Body };
}

async function get(key: string, path: string) {
  const response = await world.api.external(path, key);
  return { status: response.status, body: (await json(response)) as Body };
}

async function cancel(key: string, id: string, body: unknown) {
  const response = await world.api.external(`/service-requests/${id}/cancel`, key, jsonInit('POST', body));
  return { status: response.status, body: (await json(response)) as Body };
}

async function eventCount(): Promise<number> {
  const { rows } = await world.db.pool.query('SELECT count(*)::int AS n FROM webhook_events WHERE tenant_id = $1', [
    world.tenant.tenantId,
  ]);
  return rows[0].n as number;
}

describe('creating a service request', () => {
  it('needs only a title and fills the defaults: category other, priority normal, status new, a display code, a created entry', async () => {
    const response = await world.api.external(
      '/service-requests',
      tenantKey,
      jsonInit('POST', { title: '  Hydraulic leak on RS 4  ' }),
    );
    const created = await json(response);
    expect(response.status).toBe(201);
    expect(response.headers.get('location')).toBe(`/api/external/v1/service-requests/${created.id}`);
    expect(created).toMatchObject({
      title: 'Hydraulic leak on RS 4',
      description: '',
      category: 'other',
      priority: 'normal',
      status: 'new',
      source: 'external',
      assetId: null,
      asset: null,
      assignedTo: {},
      customerName: '',
      resolution: '',
      metadata: {},
      dueAt: null,
      resolvedAt: null,
      closedAt: null,
      files: [],
    });
    expect(created.displayCode).toMatch(/^SR-\d{6}$/);
    expect(created.history).toEqual([
      expect.objectContaining({
        type: 'created',
        fromStatus: '',
        toStatus: 'new',
        source: 'external',
        actorName: 'tenant key',
      }),
    ]);

    const events = await outboxEvents(world, created.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.event_type).toBe('service_request.created');
    expect(events[0]!.data).toMatchObject({
      id: created.id,
      title: 'Hydraulic leak on RS 4',
      status: 'new',
      priority: 'normal',
      customerName: '',
    });
    expect(events[0]!.data.displayCode).toBe(created.displayCode);
    expect(events[0]!.data).not.toHaveProperty('files');
    expect(events[0]!.data).not.toHaveProperty('history');
  });

  it('keeps every field given, with dueAt as a date-only value meaning the start of that UTC day, and the comment as a history entry', async () => {
    const created = await createRequest(world, tenantKey, {
      title: 'Spreader twistlock sticks',
      description: 'Twistlock 3 does not release',
      category: 'defect',
      priority: 'urgent',
      location: 'Quay 2',
      customerName: 'Acme',
      customerEmail: 'ops@acme.test',
      customerPhone: '+31 10 000 0000',
      reportedByName: 'Jan',
      reportedByEmail: 'jan@acme.test',
      externalRef: 'ACME-4411',
      dueAt: '2026-12-01',
      comment: 'Seen on the night shift',
      metadata: { shift: 'night', crane: 7 },
    });
    expect(created).toMatchObject({
      description: 'Twistlock 3 does not release',
      category: 'defect',
      priority: 'urgent',
      location: 'Quay 2',
      customerName: 'Acme',
      customerEmail: 'ops@acme.test',
      customerPhone: '+31 10 000 0000',
      reportedByName: 'Jan',
      reportedByEmail: 'jan@acme.test',
      externalRef: 'ACME-4411',
      dueAt: '2026-12-01T00:00:00.000Z',
      metadata: { shift: 'night', crane: 7 },
    });
    expect(created.history.map((entry: Body) => [entry.type, entry.message])).toEqual([
      ['created', `created as ${created.displayCode}`],
      ['comment', 'Seen on the night shift'],
    ]);
  });

  it('numbers display codes one after another per tenant, starting again at SR-000001 in another tenant', async () => {
    const first = await createRequest(world, tenantKey, { title: 'one' });
    const second = await createRequest(world, tenantKey, { title: 'two' });
    expect(Number(second.displayCode.slice(3))).toBe(Number(first.displayCode.slice(3)) + 1);

    const other = await createTenantWithKeys(world.db.pool, [], 'Other tenant');
    const elsewhere = await createRequest(world, other.tenantKey, { title: 'first of the other tenant' });
    expect(elsewhere.displayCode).toBe('SR-000001');
    // The other tenant's key does not see this tenant's request with the same number.
    expect((await get(other.tenantKey, `/service-requests/${first.id}`)).status).toBe(404);
  });

  it('refuses bad bodies with 400 naming the field, and writes nothing', async () => {
    const before = await eventCount();
    const cases: [unknown, string][] = [
      [{}, 'title'],
      [{ title: '   ' }, 'title'],
      [{ title: 'x', category: 'broken' }, 'category'],
      [{ title: 'x', priority: 'asap' }, 'priority'],
      [{ title: 'x', assetId: 'not-a-uuid' }, 'assetId'],
      [{ title: 'x', dueAt: '2026-02-30' }, 'dueAt'],
      [{ title: 'x', customerEmail: 42 }, 'customerEmail'],
      [{ title: 'x', metadata: 'text' }, 'metadata'],
    ];
    for (const [body, field] of cases) {
      const answer = await post(tenantKey, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.error).toContain(field);
      expect(answer.body.code).toBeTypeOf('string');
    }
    const notJson = await world.api.external('/service-requests', tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{"title":',
    });
    expect(notJson.status).toBe(400);
    expect(await eventCount()).toBe(before);
  });

  it('ignores body fields it does not know (clients may send fields of the resource that are not inputs)', async () => {
    const answer = await post(tenantKey, { title: 'Extra fields', colour: 'red', displayCode: 'SR-999999', files: [] });
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    expect(answer.body).not.toHaveProperty('colour');
    expect(answer.body.displayCode).not.toBe('SR-999999');
  });

  it('refuses to create a request as reopened or cancelled', async () => {
    for (const status of ['reopened', 'cancelled']) {
      const answer = await post(tenantKey, { title: 'x', status });
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: 'invalid_status' });
      expect(answer.body.error).toContain(status);
    }
  });

  it('creates directly as resolved or closed only with a non-empty resolution and resolutionReviewed true', async () => {
    const before = await eventCount();
    for (const status of ['resolved', 'closed']) {
      expect((await post(tenantKey, { title: 'x', status })).body.code).toBe('resolution_required');
      expect(
        (await post(tenantKey, { title: 'x', status, resolution: '   ', resolutionReviewed: true })).body.code,
      ).toBe('resolution_required');
      const unreviewed = await post(tenantKey, { title: 'x', status, resolution: 'Replaced the hose' });
      expect(unreviewed.status).toBe(400);
      expect(unreviewed.body.code).toBe('resolution_not_reviewed');
      expect(
        (await post(tenantKey, { title: 'x', status, resolution: 'Replaced the hose', resolutionReviewed: false }))
          .status,
      ).toBe(400);
    }
    expect(await eventCount()).toBe(before);

    const resolved = await createRequest(world, tenantKey, {
      title: 'fixed on site',
      status: 'resolved',
      resolution: 'Replaced the hose',
      resolutionReviewed: true,
    });
    expect(resolved).toMatchObject({ status: 'resolved', resolution: 'Replaced the hose', closedAt: null });
    expect(resolved.resolvedAt).toBe(resolved.createdAt);
    expect(resolved.history[0]).toMatchObject({ type: 'created', fromStatus: '', toStatus: 'resolved' });

    const closed = await createRequest(world, tenantKey, {
      title: 'done',
      status: 'closed',
      resolution: 'Cleaned',
      resolutionReviewed: true,
    });
    expect(closed).toMatchObject({ status: 'closed', resolution: 'Cleaned' });
    expect(closed.closedAt).toBe(closed.createdAt);
    expect(closed.resolvedAt).toBe(closed.createdAt);

    const triaged = await createRequest(world, tenantKey, { title: 'triaged at once', status: 'triaged' });
    expect(triaged).toMatchObject({ status: 'triaged', resolvedAt: null, closedAt: null });
  });

  it('links a visible asset and files it for the asset’s customer unless told otherwise', async () => {
    const asset = await createAsset(world, 'RS-ASSET-1', 'Acme');
    const created = await createRequest(world, tenantKey, { title: 'Brake noise', assetId: asset.id });
    expect(created.assetId).toBe(asset.id);
    expect(created.customerName).toBe('Acme');
    expect(created.asset).toEqual({
      id: asset.id,
      identifier: 'RS-ASSET-1',
      name: 'Asset RS-ASSET-1',
      displayCode: 'RS-ASSET-1',
      assetType: '',
      location: 'Yard B',
      customerName: 'Acme',
    });
    const unknown = await post(tenantKey, { title: 'x', assetId: '00000000-0000-4000-8000-000000000000' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ code: 'unknown_asset' });
  });
});

describe('customer-scoped keys', () => {
  it('file for their own customer by default and may not name another (403)', async () => {
    const created = await createRequest(world, acmeKey, { title: 'Door will not close' });
    expect(created).toMatchObject({ customerName: 'Acme', source: 'customer' });
    expect(created.history[0]).toMatchObject({ source: 'customer', actorName: 'Acme key' });
    expect((await createRequest(world, acmeKey, { title: 'same name', customerName: 'Acme' })).customerName).toBe(
      'Acme',
    );

    const other = await post(acmeKey, { title: 'for someone else', customerName: 'Globex' });
    expect(other.status).toBe(403);
    expect(other.body).toMatchObject({ code: 'customer_scope' });
    expect(other.body.error).toContain('Acme');
  });

  it('may only link assets of their own customer', async () => {
    const acmeAsset = await createAsset(world, 'ACME-1', 'Acme');
    const globexAsset = await createAsset(world, 'GLOBEX-1', 'Globex');
    expect((await createRequest(world, acmeKey, { title: 'mine', assetId: acmeAsset.id })).asset.id).toBe(acmeAsset.id);
    const foreign = await post(acmeKey, { title: 'theirs', assetId: globexAsset.id });
    expect(foreign.status).toBe(400);
    expect(foreign.body).toMatchObject({ code: 'unknown_asset' });
  });

  it('see and touch only their customer’s requests: another customer’s request is 404 everywhere', async () => {
    const globexRequest = await createRequest(world, tenantKey, { title: 'Globex crane', customerName: 'Globex' });
    const before = await outboxEvents(world, globexRequest.id);
    expect((await get(acmeKey, `/service-requests/${globexRequest.id}`)).status).toBe(404);
    expect((await patchRequest(world, acmeKey, globexRequest.id, { priority: 'high' })).status).toBe(404);
    expect((await cancel(acmeKey, globexRequest.id, { reason: 'not mine' })).status).toBe(404);
    expect((await get(acmeKey, `/service-requests/${globexRequest.id}/files`)).status).toBe(404);
    expect((await outboxEvents(world, globexRequest.id)).length).toBe(before.length);

    // The owner and the tenant key do see it.
    expect((await get(globexKey, `/service-requests/${globexRequest.id}`)).body.title).toBe('Globex crane');
    expect((await get(tenantKey, `/service-requests/${globexRequest.id}`)).status).toBe(200);

    const list = await get(acmeKey, '/service-requests?limit=500');
    expect(list.body.scope).toEqual({ customerName: 'Acme', customerScoped: true });
    expect(list.body.items.length).toBeGreaterThan(0);
    expect(list.body.items.every((item: Body) => item.customerName === 'Acme')).toBe(true);
    // Asking for another customer's requests with a customer key finds nothing.
    expect((await get(acmeKey, '/service-requests?customerName=Globex')).body.items).toEqual([]);
  });

  it('cannot move a request to another customer, while a tenant key can', async () => {
    const created = await createRequest(world, acmeKey, { title: 'mine to keep' });
    const moved = await patchRequest(world, acmeKey, created.id, { customerName: 'Globex' });
    expect(moved.status).toBe(403);
    const byTenant = await patchRequest(world, tenantKey, created.id, { customerName: 'Globex' });
    expect(byTenant.status).toBe(200);
    expect(byTenant.body.customerName).toBe('Globex');
    expect((await get(acmeKey, `/service-requests/${created.id}`)).status).toBe(404);
  });
});

describe('listing service requests', () => {
  let lister: ServiceRequestWorld;
  let key: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    lister = await startWorld('service_request_list', ['Acme', 'Globex']);
    key = lister.tenant.tenantKey;
    const asset = await createAsset(lister, 'LIST-1', 'Acme');
    const specs: [string, Record<string, unknown>][] = [
      [
        'leak',
        {
          title: 'Hydraulic leak',
          category: 'defect',
          priority: 'urgent',
          customerName: 'Acme',
          assetId: asset.id,
          externalRef: 'EXT-100%',
        },
      ],
      [
        'service',
        { title: 'Annual service', category: 'maintenance_request', priority: 'normal', customerName: 'Acme' },
      ],
      [
        'cleaning',
        { title: 'Cab cleaning', category: 'cleaning', priority: 'low', customerName: 'Globex', externalRef: 'GLX-7' },
      ],
      [
        'safety',
        {
          title: 'Missing fire extinguisher',
          category: 'safety',
          priority: 'high',
          customerName: 'Globex',
          status: 'triaged',
        },
      ],
    ];
    for (const [name, body] of specs) ids[name] = (await createRequest(lister, key, body)).id;
    // Spread creation times over known days.
    const days: Record<string, string> = {
      leak: '2026-03-01T10:00:00Z',
      service: '2026-03-02T10:00:00Z',
      cleaning: '2026-03-03T10:00:00Z',
      safety: '2026-03-04T10:00:00Z',
    };
    for (const [name, at] of Object.entries(days)) {
      await lister.db.pool.query('UPDATE service_requests SET created_at = $2 WHERE id = $1', [ids[name], at]);
    }
  });
  afterAll(async () => {
    await lister?.close();
  });

  async function titles(query: string): Promise<string[]> {
    const response = await lister.api.external(`/service-requests${query}`, key);
    const body = await json(response);
    expect(response.status, JSON.stringify(body)).toBe(200);
    return body.items.map((item: Body) => item.title);
  }

  it('answers items newest first with paging and scope', async () => {
    const response = await lister.api.external('/service-requests', key);
    const body = await json(response);
    expect(body.paging).toEqual({ limit: 100, offset: 0 });
    expect(body.scope).toEqual({ customerName: null, customerScoped: false });
    expect(body.items.map((item: Body) => item.title)).toEqual([
      'Missing fire extinguisher',
      'Cab cleaning',
      'Annual service',
      'Hydraulic leak',
    ]);
    expect(body.items[3].history[0].type).toBe('created');
  });

  it('filters by status, priority, category (one or several), assetId and customerName', async () => {
    expect(await titles('?status=triaged')).toEqual(['Missing fire extinguisher']);
    expect(await titles('?status=new&priority=urgent,low')).toEqual(['Cab cleaning', 'Hydraulic leak']);
    expect(await titles('?category=defect,cleaning')).toEqual(['Cab cleaning', 'Hydraulic leak']);
    const assetId = (await lister.db.pool.query("SELECT id FROM assets WHERE identifier = 'LIST-1'")).rows[0].id;
    expect(await titles(`?assetId=${assetId}`)).toEqual(['Hydraulic leak']);
    expect(await titles('?customerName=Globex')).toEqual(['Missing fire extinguisher', 'Cab cleaning']);
    expect(await titles('?customerName=globex')).toEqual([]);
  });

  it('searches q case-insensitively over title, displayCode and externalRef, taking % literally', async () => {
    expect(await titles('?q=HYDRAULIC')).toEqual(['Hydraulic leak']);
    expect(await titles('?q=glx-7')).toEqual(['Cab cleaning']);
    expect(await titles('?q=100%25')).toEqual(['Hydraulic leak']);
    expect(await titles('?q=%25')).toEqual(['Hydraulic leak']);
    const code = (await lister.db.pool.query('SELECT display_code FROM service_requests WHERE id = $1', [ids.service]))
      .rows[0].display_code;
    expect(await titles(`?q=${code.toLowerCase()}`)).toEqual(['Annual service']);
  });

  it('filters the creation time with from/to (a date-only to includes that whole day) and pages with limit/offset', async () => {
    expect(await titles('?from=2026-03-02&to=2026-03-03')).toEqual(['Cab cleaning', 'Annual service']);
    expect(await titles('?from=2026-03-02T10:00:01Z')).toEqual(['Missing fire extinguisher', 'Cab cleaning']);
    expect(await titles('?to=2026-03-01')).toEqual(['Hydraulic leak']);
    expect(await titles('?limit=2&offset=1')).toEqual(['Cab cleaning', 'Annual service']);
    const page = await json(await lister.api.external('/service-requests?limit=2&offset=1', key));
    expect(page.paging).toEqual({ limit: 2, offset: 1 });
  });

  it('refuses bad filters with 400 naming the parameter', async () => {
    for (const [query, name] of [
      ['?status=open', 'status'],
      ['?priority=asap', 'priority'],
      ['?category=misc', 'category'],
      ['?assetId=abc', 'assetId'],
      ['?from=yesterday', 'from'],
      ['?from=2026-03-04&to=2026-03-01', 'range'],
      ['?limit=0', 'limit'],
      ['?limit=501', 'limit'],
      ['?offset=-1', 'offset'],
    ] as const) {
      const response = await lister.api.external(`/service-requests${query}`, key);
      expect(response.status, query).toBe(400);
      expect((await json(response)).error).toContain(name);
    }
  });
});

describe('updating a service request', () => {
  it('records field changes with their old and new values, a comment as its own entry, and writes one updated event', async () => {
    const created = await createRequest(world, tenantKey, {
      title: 'Seat belt frayed',
      priority: 'normal',
      metadata: { a: 1 },
    });
    const answer = await patchRequest(world, tenantKey, created.id, {
      priority: 'high',
      title: 'Seat belt frayed (driver side)',
      dueAt: '2026-11-20T12:00:00Z',
      metadata: { a: 2 },
      comment: 'Parts ordered',
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      priority: 'high',
      title: 'Seat belt frayed (driver side)',
      dueAt: '2026-11-20T12:00:00.000Z',
      metadata: { a: 2 },
    });
    const [createdEntry, updatedEntry, commentEntry] = answer.body.history;
    expect(createdEntry.type).toBe('created');
    expect(updatedEntry).toMatchObject({
      type: 'updated',
      fromStatus: '',
      toStatus: '',
      changes: {
        priority: { from: 'normal', to: 'high' },
        title: { from: 'Seat belt frayed', to: 'Seat belt frayed (driver side)' },
        dueAt: { from: null, to: '2026-11-20T12:00:00.000Z' },
        metadata: { from: { a: 1 }, to: { a: 2 } },
      },
    });
    expect(commentEntry).toMatchObject({ type: 'comment', message: 'Parts ordered' });
    expect(answer.body.history).toHaveLength(3);
    expect(Date.parse(answer.body.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));

    const events = await outboxEvents(world, created.id);
    expect(events.map((event) => event.event_type)).toEqual(['service_request.created', 'service_request.updated']);
    expect(events[1]!.data).toMatchObject({
      id: created.id,
      title: 'Seat belt frayed (driver side)',
      priority: 'high',
      status: 'new',
      comment: 'Parts ordered',
    });
    expect(events[1]!.data.changes.priority).toEqual({ from: 'normal', to: 'high' });

    // Clearing dueAt and unlinking the asset with null.
    const cleared = await patchRequest(world, tenantKey, created.id, { dueAt: null });
    expect(cleared.body.dueAt).toBeNull();
    expect(cleared.body.history.at(-1).changes).toEqual({ dueAt: { from: '2026-11-20T12:00:00.000Z', to: null } });
  });

  it('writes nothing for a PATCH that changes nothing (same values, same status, empty body)', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Nothing to change', priority: 'low' });
    for (const body of [{}, { priority: 'low' }, { status: 'new' }, { title: 'Nothing to change', comment: '' }]) {
      const answer = await patchRequest(world, tenantKey, created.id, body);
      expect(answer.status).toBe(200);
      expect(answer.body.updatedAt).toBe(created.updatedAt);
      expect(answer.body.history).toHaveLength(1);
    }
    expect(await outboxEvents(world, created.id)).toHaveLength(1);
  });

  it('moves status by the table, recording fromStatus/toStatus, and sets and clears resolvedAt/closedAt', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Lifecycle' });
    const triaged = await patchRequest(world, tenantKey, created.id, { status: 'triaged' });
    expect(triaged.body.history.at(-1)).toMatchObject({
      type: 'status_changed',
      fromStatus: 'new',
      toStatus: 'triaged',
    });

    const resolved = await patchRequest(world, tenantKey, created.id, {
      status: 'resolved',
      resolution: 'Adjusted the valve',
      resolutionReviewed: true,
    });
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ status: 'resolved', resolution: 'Adjusted the valve', closedAt: null });
    expect(resolved.body.resolvedAt).not.toBeNull();
    expect(resolved.body.history.at(-2)).toMatchObject({
      type: 'updated',
      changes: { resolution: { from: '', to: 'Adjusted the valve' } },
    });
    expect(resolved.body.history.at(-1)).toMatchObject({
      type: 'status_changed',
      fromStatus: 'triaged',
      toStatus: 'resolved',
    });

    // Closing a resolved request: the recorded resolution counts, the review must be confirmed.
    const unreviewed = await patchRequest(world, tenantKey, created.id, { status: 'closed' });
    expect(unreviewed.status).toBe(400);
    expect(unreviewed.body.code).toBe('resolution_not_reviewed');
    const closed = await patchRequest(world, tenantKey, created.id, { status: 'closed', resolutionReviewed: true });
    expect(closed.status).toBe(200);
    expect(closed.body.resolvedAt).toBe(resolved.body.resolvedAt);
    expect(closed.body.closedAt).not.toBeNull();

    const reopened = await patchRequest(world, tenantKey, created.id, { status: 'reopened', comment: 'Leaking again' });
    expect(reopened.body).toMatchObject({ status: 'reopened', resolvedAt: null, closedAt: null });
    expect(reopened.body.history.slice(-2)).toEqual([
      expect.objectContaining({ type: 'status_changed', fromStatus: 'closed', toStatus: 'reopened' }),
      expect.objectContaining({ type: 'comment', message: 'Leaking again' }),
    ]);

    // Re-resolving after a reopen needs the review again.
    const again = await patchRequest(world, tenantKey, created.id, { status: 'resolved' });
    expect(again.body.code).toBe('resolution_not_reviewed');

    const direct = await createRequest(world, tenantKey, { title: 'closed from work', status: 'in_progress' });
    const closedDirect = await patchRequest(world, tenantKey, direct.id, {
      status: 'closed',
      resolution: 'Swapped the unit',
      resolutionReviewed: true,
    });
    expect(closedDirect.body.resolvedAt).toBe(closedDirect.body.closedAt);

    const events = await outboxEvents(world, created.id);
    expect(events.map((event) => event.event_type)).toEqual([
      'service_request.created',
      'service_request.updated',
      'service_request.updated',
      'service_request.updated',
      'service_request.updated',
    ]);
    expect(events.map((event) => event.data.status)).toEqual(['new', 'triaged', 'resolved', 'closed', 'reopened']);
    expect(events[2]!.data.changes.status).toEqual({ from: 'triaged', to: 'resolved' });
  });

  it('applies the resolution rules on update: missing or blank resolution, unreviewed, and a resolved request keeping its resolution', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Rules' });
    for (const status of ['resolved', 'closed']) {
      expect((await patchRequest(world, tenantKey, created.id, { status, resolutionReviewed: true })).body.code).toBe(
        'resolution_required',
      );
      expect(
        (await patchRequest(world, tenantKey, created.id, { status, resolution: ' ', resolutionReviewed: true })).body
          .code,
      ).toBe('resolution_required');
      expect((await patchRequest(world, tenantKey, created.id, { status, resolution: 'Done' })).body.code).toBe(
        'resolution_not_reviewed',
      );
    }
    const unchanged = await get(tenantKey, `/service-requests/${created.id}`);
    expect(unchanged.body).toMatchObject({ status: 'new', resolution: '' });
    expect(unchanged.body.history).toHaveLength(1);

    await patchRequest(world, tenantKey, created.id, {
      status: 'resolved',
      resolution: 'Done',
      resolutionReviewed: true,
    });
    const blanked = await patchRequest(world, tenantKey, created.id, { resolution: '' });
    expect(blanked.status).toBe(400);
    expect(blanked.body.code).toBe('resolution_required');
    const reworded = await patchRequest(world, tenantKey, created.id, { resolution: 'Done: replaced seal' });
    expect(reworded.body.resolution).toBe('Done: replaced seal');
    expect(await outboxEvents(world, created.id)).toHaveLength(3);
  });

  it('refuses a status change to cancelled and points to the cancel operation', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Cancel me properly' });
    const answer = await patchRequest(world, tenantKey, created.id, { status: 'cancelled' });
    expect(answer.status).toBe(409);
    expect(answer.body.error).toContain('/cancel');
  });

  it('answers 404 for an unknown id and 400 for a malformed one', async () => {
    expect((await patchRequest(world, tenantKey, '00000000-0000-4000-8000-000000000000', { title: 'x' })).status).toBe(
      404,
    );
    expect((await get(tenantKey, '/service-requests/00000000-0000-4000-8000-000000000000')).body.code).toBe(
      'service_request_not_found',
    );
    const malformed = await get(tenantKey, '/service-requests/123');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toContain('id');
  });
});

describe('cancelling a service request', () => {
  it('needs a reason, records the cancellation and writes one cancelled event', async () => {
    const created = await createRequest(world, tenantKey, { title: 'Duplicate report', status: 'triaged' });
    const original = await createRequest(world, tenantKey, { title: 'Original report' });

    const noReason = await cancel(tenantKey, created.id, {});
    expect(noReason.status).toBe(400);
    expect(noReason.body.error).toContain('reason');
    expect((await cancel(tenantKey, created.id, { reason: '  ' })).status).toBe(400);
    const unknownDuplicate = await cancel(tenantKey, created.id, { reason: 'dup', duplicateOf: 'SR-999999' });
    expect(unknownDuplicate.status).toBe(400);
    expect(unknownDuplicate.body.code).toBe('unknown_duplicate');
    expect((await cancel(tenantKey, created.id, { reason: 'dup', duplicateOf: created.id })).body.code).toBe(
      'invalid_duplicate',
    );

    const answer = await cancel(tenantKey, created.id, {
      reason: 'Reported twice',
      duplicateOf: original.displayCode.toLowerCase(),
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ id: created.id, cancelled: true });

    const after = await get(tenantKey, `/service-requests/${created.id}`);
    expect(after.body.status).toBe('cancelled');
    expect(after.body.history.at(-1)).toMatchObject({
      type: 'cancelled',
      fromStatus: 'triaged',
      toStatus: 'cancelled',
      message: 'Reported twice',
      changes: { reason: 'Reported twice', duplicateOf: { id: original.id, displayCode: original.displayCode } },
    });
    const stored = await world.db.pool.query(
      'SELECT cancel_reason, duplicate_of, cancelled_at FROM service_requests WHERE id = $1',
      [created.id],
    );
    expect(stored.rows[0]).toMatchObject({ cancel_reason: 'Reported twice', duplicate_of: original.id });
    expect(stored.rows[0].cancelled_at).toBeInstanceOf(Date);

    const events = await outboxEvents(world, created.id);
    expect(events.map((event) => event.event_type)).toEqual(['service_request.created', 'service_request.cancelled']);
    expect(events[1]!.data).toMatchObject({
      id: created.id,
      status: 'cancelled',
      cancelReason: 'Reported twice',
      duplicateOf: { id: original.id },
    });
  });

  it('refuses to cancel a resolved, closed or already cancelled request (409) and leaves it as it was', async () => {
    const resolved = await createRequest(world, tenantKey, {
      title: 'r',
      status: 'resolved',
      resolution: 'ok',
      resolutionReviewed: true,
    });
    const closed = await createRequest(world, tenantKey, {
      title: 'c',
      status: 'closed',
      resolution: 'ok',
      resolutionReviewed: true,
    });
    const cancelled = await createRequest(world, tenantKey, { title: 'x' });
    expect((await cancel(tenantKey, cancelled.id, { reason: 'first' })).status).toBe(200);
    for (const [request, status] of [
      [resolved, 'resolved'],
      [closed, 'closed'],
      [cancelled, 'cancelled'],
    ] as const) {
      const answer = await cancel(tenantKey, request.id, { reason: 'again' });
      expect(answer.status).toBe(409);
      expect(answer.body.error).toContain(status);
      expect((await get(tenantKey, `/service-requests/${request.id}`)).body.status).toBe(status);
      expect(
        (await outboxEvents(world, request.id))
          .map((event) => event.event_type)
          .filter((type) => type.endsWith('cancelled')).length,
      ).toBe(status === 'cancelled' ? 1 : 0);
    }
    // A reopened request can be cancelled again.
    const reopened = await patchRequest(world, tenantKey, resolved.id, { status: 'reopened' });
    expect(reopened.status).toBe(200);
    expect((await cancel(tenantKey, resolved.id, { reason: 'no longer needed' })).status).toBe(200);
  });

  it('lets a customer key cancel its own request', async () => {
    const created = await createRequest(world, acmeKey, { title: 'Changed my mind' });
    const answer = await cancel(acmeKey, created.id, { reason: 'Fixed it ourselves' });
    expect(answer.body).toEqual({ id: created.id, cancelled: true });
    const entry = (await get(acmeKey, `/service-requests/${created.id}`)).body.history.at(-1);
    expect(entry).toMatchObject({ type: 'cancelled', source: 'customer', actorName: 'Acme key' });
  });
});
