/**
 * How a writer of readings marks devices for derivation, in the transaction that stores
 * them (the contract between ingest and the worker, docs/derivation.md). Parameters:
 * device ids, tenant ids and each device's earliest new reading time, as arrays.
 *
 * dirty_from is the earliest reading not yet derived; new_from the earliest marked since
 * a worker claimed the device (the worker turns it into the next dirty_from when it
 * commits). marked_at stays at the first mark, so the queue is served first in, first
 * out, and a worker never holds these rows locked for longer than its commit. Rows are
 * locked in device order here and in the worker, so the two never deadlock.
 */
export const markDirtySql = `/* markDirty */
INSERT INTO derivation_queue AS q (device_id, tenant_id, dirty_from)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS m(device_id, tenant_id, dirty_from) ORDER BY device_id
ON CONFLICT (device_id) DO UPDATE SET dirty_from = least(q.dirty_from, excluded.dirty_from), new_from = least(q.new_from, excluded.dirty_from)`;
