import type { Pool } from '@gantry/db';

/** Committed bronze rows (every copy of every message) and silver readings. */
export async function countRows(pool: Pool): Promise<{ bronze: number; silver: number }> {
  const { rows } = await pool.query<{ bronze: number; silver: number }>(
    `/* soak:countRows */
     SELECT (SELECT count(*)::int FROM device_messages) AS bronze, (SELECT count(*)::int FROM telemetry_readings) AS silver`,
  );
  return rows[0]!;
}

export interface Backlogs {
  /** Devices in derivation_queue (timeout rechecks included). */
  queued: number;
  /** now − the oldest dirty_from: device time of the oldest reading not yet derived (0: none waits). */
  derivationLag: number;
  /**
   * now − the newest device time committed for any device (device_state.last_message_at,
   * written in the transaction of the batch): how old the freshest data a reader can see
   * is. Devices publish continuously, so this is the end-to-end lag — device time to
   * committed — of what is being committed now; it includes broker queueing and the time
   * a message waits inside ingest, which received − device time does not.
   */
  freshness: number;
  /** Ingest statements waiting for a row lock right now (held by the worker's claim or the other writer). */
  ingestLockWaits: number;
}

export async function probeBacklogs(pool: Pool): Promise<Backlogs> {
  const { rows } = await pool.query<{
    queued: number;
    derivation_lag: number | null;
    freshness: number | null;
    lock_waits: number;
  }>(
    `/* soak:probeBacklogs */
     SELECT (SELECT count(*)::int FROM derivation_queue) AS queued,
            (SELECT extract(epoch FROM now() - min(dirty_from))::float8 FROM derivation_queue WHERE dirty_from < 'infinity') AS derivation_lag,
            (SELECT extract(epoch FROM now() - max(last_message_at))::float8 FROM device_state) AS freshness,
            (SELECT count(*)::int FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'gantry-ingest' AND wait_event_type = 'Lock') AS lock_waits`,
  );
  const row = rows[0]!;
  return {
    queued: row.queued,
    derivationLag: Math.max(0, row.derivation_lag ?? 0),
    freshness: Math.max(0, row.freshness ?? 0),
    ingestLockWaits: row.lock_waits,
  };
}

export async function goldState(pool: Pool): Promise<{ backlog: number; failed: string[] }> {
  const { rows } = await pool.query<{ backlog: number; failed: string[] }>(
    `/* soak:goldState */
     SELECT (SELECT count(*)::int FROM gold_invalidations) AS backlog,
            (SELECT coalesce(array_agg(relation ORDER BY relation), '{}') FROM gold_coverage WHERE status = 'failed') AS failed`,
  );
  return rows[0]!;
}

export async function bronzeStatuses(pool: Pool): Promise<Array<{ status: string; error: string | null; n: number }>> {
  const { rows } = await pool.query<{ status: string; error: string | null; n: number }>(
    `/* soak:bronzeStatuses */ SELECT status, error, count(*)::int AS n FROM device_messages GROUP BY status, error ORDER BY count(*) DESC`,
  );
  return rows;
}

export async function derivedCounts(
  pool: Pool,
): Promise<{ segments: number; usage: number; identifier: number; alerts: number }> {
  const { rows } = await pool.query<{ segments: number; usage: number; identifier: number; alerts: number }>(
    `/* soak:derivedCounts */
     SELECT (SELECT count(*)::int FROM telemetry_segments) AS segments, (SELECT count(*)::int FROM usage_sessions) AS usage,
            (SELECT count(*)::int FROM identifier_sessions) AS identifier, (SELECT count(*)::int FROM geofence_alerts) AS alerts`,
  );
  return rows[0]!;
}

export interface TableChurn {
  table: string;
  updates: number;
  /** Share of the updates that stayed on their page (HOT: no new index entries), in %. */
  hotPercent: number;
  deadRows: number;
  pages: number;
  /** Vacuums by autovacuum, or by the worker's table maintenance where autovacuum is off. */
  vacuums: number;
}

/** How the tables rewritten a row per device per batch took it: the bloat that slows their readers. */
export async function tableChurn(pool: Pool): Promise<TableChurn[]> {
  const { rows } = await pool.query<TableChurn>(
    `/* soak:tableChurn */
     SELECT relname AS "table", n_tup_upd::float8 AS updates,
            CASE WHEN n_tup_upd = 0 THEN 0 ELSE 100.0 * n_tup_hot_upd / n_tup_upd END::float8 AS "hotPercent",
            n_dead_tup::float8 AS "deadRows", (pg_relation_size(relid) / 8192)::float8 AS pages,
            (autovacuum_count + vacuum_count)::float8 AS vacuums
       FROM pg_stat_user_tables
      WHERE relname IN ('device_state', 'derivation_queue', 'derivation_state', 'device_counts_hourly')
      ORDER BY n_tup_upd DESC`,
  );
  return rows;
}
