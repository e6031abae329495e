import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json } from '../support/api.ts';
import {
  createRequest,
  jsonInit,
  outboxEvents,
  patchRequest,
  startWorld,
  type Body,
  type ServiceRequestWorld,
} from './support.ts';

// Every (from, to) pair of statuses through PATCH, against the table of docs/service-requests.md written out
// here independently of the code.

const statuses = [
  'new',
  'reopened',
  'triaged',
  'in_progress',
  'waiting_customer',
  'resolved',
  'closed',
  'cancelled',
] as const;
type Status = (typeof statuses)[number];

const table: Record<Status, Status[]> = {
  new: ['triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed'],
  reopened: ['triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed'],
  triaged: ['in_progress', 'waiting_customer', 'resolved', 'closed'],
  in_progress: ['waiting_customer', 'resolved', 'closed'],
  waiting_customer: ['in_progress', 'resolved', 'closed'],
  resolved: ['closed', 'reopened'],
  closed: ['reopened'],
  cancelled: [],
};

const resolutionFields = { resolution: 'Fixed', resolutionReviewed: true };

let world: ServiceRequestWorld;
let key: string;

beforeAll(async () => {
  world = await startWorld('service_request_transitions', []);
  key = world.tenant.tenantKey;
});
afterAll(async () => {
  await world?.close();
});

/** A fresh request in the given status, reached the way a client would. */
async function requestIn(status: Status): Promise<Body> {
  switch (status) {
    case 'reopened': {
      const resolved = await createRequest(world, key, { title: 'to reopen', status: 'resolved', ...resolutionFields });
      const reopened = await patchRequest(world, key, resolved.id, { status: 'reopened' });
      expect(reopened.status).toBe(200);
      return reopened.body;
    }
    case 'cancelled': {
      const created = await createRequest(world, key, { title: 'to cancel' });
      const response = await world.api.external(
        `/service-requests/${created.id}/cancel`,
        key,
        jsonInit('POST', { reason: 'test' }),
      );
      expect(response.status).toBe(200);
      return { ...created, status: 'cancelled' };
    }
    case 'resolved':
    case 'closed':
      return createRequest(world, key, { title: `created ${status}`, status, ...resolutionFields });
    default:
      return createRequest(world, key, { title: `created ${status}`, status });
  }
}

describe('service request status transitions', () => {
  for (const from of statuses) {
    it(`from ${from}: allows exactly ${table[from].join(', ') || 'nothing'}`, async () => {
      // Refused moves leave the request untouched, so one request serves them all.
      const subject = await requestIn(from);
      const eventsBefore = (await outboxEvents(world, subject.id)).length;
      for (const to of statuses) {
        if (to === from || table[from].includes(to)) continue;
        const answer = await patchRequest(world, key, subject.id, { status: to, ...resolutionFields });
        expect(answer.status, `${from} → ${to}`).toBe(409);
        expect(answer.body.code).toBe('invalid_transition');
        if (to !== 'cancelled' && from !== 'cancelled')
          expect(answer.body.error).toContain(`allowed from ${from}: ${table[from].join(', ')}`);
      }
      const untouched = await json(await world.api.external(`/service-requests/${subject.id}`, key));
      expect(untouched.status).toBe(from);
      expect(untouched.resolution).toBe(subject.resolution);
      expect((await outboxEvents(world, subject.id)).length).toBe(eventsBefore);

      for (const to of table[from]) {
        const fresh = await requestIn(from);
        const answer = await patchRequest(world, key, fresh.id, { status: to, ...resolutionFields });
        expect(answer.status, `${from} → ${to}: ${JSON.stringify(answer.body)}`).toBe(200);
        expect(answer.body.status).toBe(to);
        expect(answer.body.history.at(-1)).toMatchObject({ type: 'status_changed', fromStatus: from, toStatus: to });
        expect(answer.body.resolvedAt !== null).toBe(to === 'resolved' || to === 'closed');
        expect(answer.body.closedAt !== null).toBe(to === 'closed');
        const events = await outboxEvents(world, fresh.id);
        expect(events.at(-1)).toMatchObject({ event_type: 'service_request.updated', data: { status: to } });
      }
    });
  }

  it('names the final state when a cancelled request is moved', async () => {
    const subject = await requestIn('cancelled');
    const answer = await patchRequest(world, key, subject.id, { status: 'triaged' });
    expect(answer.status).toBe(409);
    expect(answer.body.error).toContain('cancelled is final');
  });
});
