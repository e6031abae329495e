import { deviceMessageTypes, readingTypes } from '@gantry/contracts';
import { withTransaction, type Pool, type PoolClient, type Queryable } from './pool.ts';

/**
 * The 24 closed hours before the open one, summed per device (device_counts_window,
 * db/migrations/0480_counter_window.sql): data quality's default range reads one row per
 * device for them instead of 24. The window is [windowStart, windowStart + 24 h); the
 * open hour is read from device_counts_hourly beside it.
 *
 * Every writer of device_counts_hourly keeps it exact. Ingest, in each batch's
 * transaction and before it writes counter rows, takes the shared side of the window's
 * lock (lockCounterWindow) and adds the batch's counts for hours inside the window
 * (addToCounterWindow; live traffic counts in the open hour, so most batches add nothing).
 * The worker moves the window when an hour closes (advanceCounterWindow) under the
 * exclusive side, which waits for the batches in flight: a batch committed before the
 * move is in the counter rows the move reads, a batch after it sees the new window. The
 * recount rebuilds the window whole (rebuildCounterWindow).
 */

/** The counter columns data quality sums, in this order wherever the window's sums are listed. */
export const counterWindowColumns: readonly string[] = [
  ...deviceMessageTypes.map((type) => `${type}_messages`),
  'timed_messages',
  'delayed_messages',
  ...readingTypes.map((type) => `${type}_readings`),
  'valid_gps_fixes',
];

export const COUNTER_WINDOW_HOURS = 24;
const HOUR_MS = 3_600_000;
const WINDOW_MS = COUNTER_WINDOW_HOURS * HOUR_MS;
const lockKey = `hashtext('gantry:counters:window')`;
/** UTC hours, as the counters are bucketed (date_bin, not the session's time zone). */
const openHourSql = `date_bin(INTERVAL '1 hour', now(), TIMESTAMPTZ '2000-01-01 00:00:00+00')`;

/**
 * For a writer of counter rows, in its transaction and before it writes any: takes the
 * shared side of the window's lock (held until the commit) and gives the window's first
 * hour, read once the lock is held (null: no window built yet).
 */
export async function lockCounterWindow(client: PoolClient): Promise<number | null> {
  // Two statements in one round trip: the second one's snapshot is taken after the lock.
  const results = (await client.query(
    `/* counters:lockWindow */ SELECT pg_advisory_xact_lock_shared(${lockKey});
     SELECT window_start FROM device_counts_window_start`,
  )) as unknown as Array<{ rows: Array<{ window_start: Date }> }>;
  return results[1]?.rows[0]?.window_start.getTime() ?? null;
}

/** Whether an hour's counts belong in the window that starts at `windowStart`. */
export function inCounterWindow(windowStart: number | null, bucket: number): boolean {
  return windowStart !== null && bucket >= windowStart && bucket < windowStart + WINDOW_MS;
}

/** A device's share of a batch for the window: sums in counterWindowColumns order. */
export interface CounterWindowDelta {
  tenantId: string;
  deviceId: string;
  sums: number[];
}

/** Adds counts to the window, in the caller's transaction (which holds lockCounterWindow). */
export async function addToCounterWindow(client: PoolClient, deltas: CounterWindowDelta[]): Promise<void> {
  if (deltas.length === 0) return;
  const sorted = [...deltas].sort((a, b) =>
    a.tenantId === b.tenantId ? (a.deviceId < b.deviceId ? -1 : 1) : a.tenantId < b.tenantId ? -1 : 1,
  );
  const columns = counterWindowColumns;
  await client.query(
    `/* counters:addToWindow */
     INSERT INTO device_counts_window AS w (tenant_id, device_id, ${columns.join(', ')})
     SELECT * FROM unnest($1::uuid[], $2::uuid[], ${columns.map((_, i) => `$${i + 3}::bigint[]`).join(', ')})
     ON CONFLICT (tenant_id, device_id) DO UPDATE SET ${columns.map((c) => `${c} = w.${c} + excluded.${c}`).join(', ')}`,
    [
      sorted.map((delta) => delta.tenantId),
      sorted.map((delta) => delta.deviceId),
      ...columns.map((_, i) => sorted.map((delta) => delta.sums[i] ?? 0)),
    ],
  );
}

const sums = (sign: string) => counterWindowColumns.map((c) => `sum(${sign}c.${c})`).join(', ');
const allZero = counterWindowColumns.map((c) => `${c} = 0`).join(' AND ');

/** Replaces the window with the sums of the 24 hours from `start`, in the caller's transaction (lock held). */
async function buildWindow(client: PoolClient, start: Date): Promise<void> {
  await client.query('/* counters:clearWindow */ DELETE FROM device_counts_window');
  await client.query(
    `/* counters:buildWindow */
     INSERT INTO device_counts_window (tenant_id, device_id, ${counterWindowColumns.join(', ')})
     SELECT c.tenant_id, c.device_id, ${sums('')}
       FROM tenants t
       JOIN device_counts_hourly c ON c.tenant_id = t.id AND c.bucket >= $1::timestamptz AND c.bucket < $2::timestamptz
      GROUP BY c.tenant_id, c.device_id`,
    [start, new Date(start.getTime() + WINDOW_MS)],
  );
  // Statistics for the planner at once: a rebuilt table it believed tiny was joined by
  // rescanning it for every device.
  await client.query('ANALYZE device_counts_window');
  await client.query(
    `INSERT INTO device_counts_window_start (window_start) VALUES ($1::timestamptz)
     ON CONFLICT (one_row) DO UPDATE SET window_start = excluded.window_start`,
    [start],
  );
}

/**
 * The exclusive side of the window's lock, held until the caller's transaction ends: for
 * a writer that replaces counter rows wholesale, taken before it locks the counter tables
 * (the order ingest takes them in).
 */
export async function holdCounterWindow(client: PoolClient): Promise<void> {
  await client.query(`/* counters:lockWindow */ SELECT pg_advisory_xact_lock(${lockKey})`);
}

/**
 * Rebuilds the window from the counter rows for the 24 hours before the open one, in the
 * caller's transaction: for writers that replace counter rows wholesale (the recount).
 */
export async function rebuildCounterWindow(client: PoolClient): Promise<void> {
  await holdCounterWindow(client);
  const { rows } = await client.query<{ target: Date }>(`SELECT ${openHourSql} - INTERVAL '24 hours' AS target`);
  await buildWindow(client, rows[0]!.target);
}

/**
 * Moves the window to the 24 hours before the open hour (the database's clock): per hour
 * passed, the hour that left is taken away and the hour that closed is added, for every
 * tenant (each read through the counters' (tenant_id, bucket) index). A window missing,
 * ahead of the clock or more than a day behind is built whole. Nothing to do costs one
 * small read.
 */
export async function advanceCounterWindow(pool: Pool): Promise<{ hours: number; rebuilt: boolean }> {
  const state = `SELECT (SELECT window_start FROM device_counts_window_start) AS start, ${openHourSql} - INTERVAL '24 hours' AS target`;
  const due = async (db: Queryable) => (await db.query<{ start: Date | null; target: Date }>(state)).rows[0]!;
  const first = await due(pool);
  if (first.start?.getTime() === first.target.getTime()) return { hours: 0, rebuilt: false };
  return withTransaction(pool, async (client) => {
    await holdCounterWindow(client);
    const { start, target } = await due(client);
    const hours = start === null ? Number.NaN : (target.getTime() - start.getTime()) / HOUR_MS;
    if (hours === 0) return { hours: 0, rebuilt: false };
    if (!(hours > 0 && hours <= COUNTER_WINDOW_HOURS)) {
      await buildWindow(client, target);
      return { hours: Number.isNaN(hours) ? 0 : hours, rebuilt: true };
    }
    for (let hour = start!.getTime(); hour < target.getTime(); hour += HOUR_MS) {
      await client.query(
        `/* counters:moveWindow */
         INSERT INTO device_counts_window AS w (tenant_id, device_id, ${counterWindowColumns.join(', ')})
         SELECT c.tenant_id, c.device_id, ${counterWindowColumns
           .map((col) => `sum(CASE WHEN c.bucket = $1::timestamptz THEN -c.${col} ELSE c.${col} END)`)
           .join(', ')}
           FROM tenants t
           JOIN device_counts_hourly c ON c.tenant_id = t.id AND c.bucket IN ($1::timestamptz, $2::timestamptz)
          GROUP BY c.tenant_id, c.device_id
         ON CONFLICT (tenant_id, device_id) DO UPDATE SET ${counterWindowColumns.map((c) => `${c} = w.${c} + excluded.${c}`).join(', ')}`,
        [new Date(hour), new Date(hour + WINDOW_MS)],
      );
    }
    // Devices whose traffic all left the window.
    await client.query(`/* counters:pruneWindow */ DELETE FROM device_counts_window WHERE ${allZero}`);
    await client.query(`UPDATE device_counts_window_start SET window_start = $1::timestamptz`, [target]);
    return { hours, rebuilt: false };
  });
}

/**
 * Devices whose window row differs from the sums of their counter rows over the window's
 * hours (each difference once, either side; a row of zeros counts as none): 0 when the
 * window is exact. A consistency check for tests, drills and benchmarks; it reads every
 * counter row of the window, so it costs what the data costs.
 */
export async function counterWindowDrift(db: Queryable): Promise<number> {
  const columns = counterWindowColumns.join(', ');
  const nonZero = `NOT (${allZero})`;
  const stored = `SELECT tenant_id, device_id, ${columns} FROM device_counts_window WHERE ${nonZero}`;
  const summed = `SELECT * FROM (
      SELECT c.tenant_id, c.device_id, ${counterWindowColumns.map((c) => `sum(c.${c})::bigint AS ${c}`).join(', ')}
        FROM device_counts_hourly c, device_counts_window_start w
       WHERE c.bucket >= w.window_start AND c.bucket < w.window_start + INTERVAL '${COUNTER_WINDOW_HOURS} hours'
       GROUP BY c.tenant_id, c.device_id) s
     WHERE ${nonZero}`;
  const { rows } = await db.query<{ n: string }>(
    `/* counters:windowDrift */
     SELECT (SELECT count(*) FROM ((${stored}) EXCEPT ALL (${summed})) a)
          + (SELECT count(*) FROM ((${summed}) EXCEPT ALL (${stored})) b) AS n`,
  );
  return Number(rows[0]?.n ?? 0);
}
