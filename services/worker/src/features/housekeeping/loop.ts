import type { Config } from '@gantry/config';
import type { Pool, StorageMode } from '@gantry/db';
import type { WorkerLoop } from '../../loop.ts';

/**
 * Deletes what has outlived its purpose: expired Idempotency-Key records, and in
 * PostgreSQL mode bronze rows past their retention (TimescaleDB drops whole chunks
 * with its own retention policy). Deletes in slices to keep transactions short.
 */
export function housekeepingLoop(deps: { pool: Pool; config: Config; storageMode: StorageMode }): WorkerLoop {
  return {
    name: 'housekeeping',
    idleMs: 60_000,
    async runOnce() {
      const expired = await deps.pool.query(
        `/* worker:expireIdempotencyKeys */
         DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT 5000)`,
      );
      let pruned = 0;
      if (deps.storageMode === 'postgres') {
        // Bronze is two tables (docs/ingest.md): batch rows of up to a few thousand messages, and single rows.
        const batches = await deps.pool.query(
          `/* worker:pruneBronzeBatches */
           DELETE FROM device_message_batches WHERE ctid IN (
             SELECT ctid FROM device_message_batches WHERE received_from < now() - make_interval(days => $1)
                AND received_to < now() - make_interval(days => $1) LIMIT 20)`,
          [deps.config.retention.bronzeDays],
        );
        const bronze = await deps.pool.query(
          `/* worker:pruneBronze */
           DELETE FROM device_message_rows WHERE ctid IN (
             SELECT ctid FROM device_message_rows WHERE received_at < now() - make_interval(days => $1) LIMIT 5000)`,
          [deps.config.retention.bronzeDays],
        );
        // Silver has no index on ts alone: `WHERE ts < cutoff` read the whole table every
        // pass, even with nothing to prune. Its key leads with the device, so the pass walks
        // the distinct devices through the key (one probe each, a loose index scan) and
        // takes each one's expired readings from the front of its key range.
        const silver = await deps.pool.query(
          `/* worker:pruneSilver */
           WITH RECURSIVE devices AS (
             (SELECT device_id FROM telemetry_readings ORDER BY device_id LIMIT 1)
             UNION ALL
             SELECT (SELECT r.device_id FROM telemetry_readings r WHERE r.device_id > d.device_id ORDER BY r.device_id LIMIT 1)
               FROM devices d WHERE d.device_id IS NOT NULL
           )
           DELETE FROM telemetry_readings WHERE ctid IN (
             SELECT expired.ctid FROM devices d
             CROSS JOIN LATERAL (
               SELECT r.ctid FROM telemetry_readings r
                WHERE r.device_id = d.device_id AND r.ts < now() - make_interval(days => $1)
                ORDER BY r.ts LIMIT 5000
             ) expired
             WHERE d.device_id IS NOT NULL
             LIMIT 5000)`,
          [deps.config.retention.readingDays],
        );
        pruned = (batches.rowCount ?? 0) + (bronze.rowCount ?? 0) + (silver.rowCount ?? 0);
      }
      return (expired.rowCount ?? 0) + pruned;
    },
  };
}
