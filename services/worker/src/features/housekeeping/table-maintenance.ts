import type { Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import type { WorkerLoop } from '../../loop.ts';

/**
 * What PostgreSQL's autovacuum does for Gantry's tables, done by the worker when the
 * server runs with `autovacuum = off`.
 *
 * Without it nothing gathers planner statistics for tables that grow from empty: a
 * newest-first page of 100 identifier sessions was planned from the tenant's assets
 * (estimated at one row) and read and sorted every session of the tenant — 60,000 rows,
 * 220 ms, against 2 ms once the tables were analyzed. Nor does anything vacuum the
 * row-per-device tables that ingest and the worker update all the time.
 *
 * The loop applies autovacuum's own rule with the server's thresholds and each table's
 * `autovacuum_*` storage options (db/migrations/0330_hot_state_tables.sql sets some):
 * ANALYZE once more rows changed than `analyze_threshold + analyze_scale_factor ×
 * rows`, VACUUM once more rows are dead than `vacuum_threshold + vacuum_scale_factor ×
 * rows`. One table per step, the most changed first; a table another session holds
 * (two workers, a migration) is skipped after a second's wait. Like autovacuum it works
 * one process per table (no parallel index vacuum) at autovacuum's cost delay and limit
 * (the table's own `autovacuum_vacuum_cost_delay` first), so a big table is vacuumed
 * slowly rather than taking a core at once; a worker that stops cancels it. Nothing
 * happens while the server's autovacuum is on, the default.
 */
export interface TableMaintenanceOptions {
  /** Work even while autovacuum is on (tests). */
  always?: boolean;
  /** How long a table just maintained is left alone (statistics reach pg_stat_* late). */
  restMs?: number;
}

interface DueTable {
  relid: string;
  name: string;
  vacuum: boolean;
  analyze: boolean;
  /** vacuum_cost_delay for it, as autovacuum would use (`2ms`, `0`). */
  costDelay: string;
}

const LOCK_NOT_AVAILABLE = '55P03';
const QUERY_CANCELED = '57014';

export function tableMaintenanceLoop(
  deps: { pool: Pool; logger: Logger },
  options: TableMaintenanceOptions = {},
): WorkerLoop {
  const restMs = options.restMs ?? 60_000;
  const rested = new Map<string, number>();
  let announced = false;
  /** Backend of the VACUUM or ANALYZE under way, for interrupt(). */
  let running: number | null = null;
  let interrupted = false;

  async function autovacuumIsOff(): Promise<boolean> {
    const { rows } = await deps.pool.query<{ off: boolean }>(
      `/* worker:autovacuumSetting */
       SELECT current_setting('autovacuum') = 'off' AND current_setting('track_counts') = 'on' AS off`,
    );
    return rows[0]?.off === true;
  }

  async function nextDueTable(): Promise<DueTable | undefined> {
    const now = Date.now();
    for (const [relid, until] of rested) if (until <= now) rested.delete(relid);
    const { rows } = await deps.pool.query<DueTable>(
      `/* worker:tablesDueForMaintenance */
       WITH tables AS (
         SELECT s.relid, format('%I.%I', s.schemaname, s.relname) AS name, s.n_dead_tup, s.n_mod_since_analyze,
                greatest(c.reltuples, 0) AS reltuples, c.reloptions
         FROM pg_stat_user_tables s
         JOIN pg_class c ON c.oid = s.relid
         WHERE c.relkind IN ('r', 'm') AND NOT (s.relid = ANY ($1::oid[]))
       ), rules AS (
         SELECT t.*,
                coalesce(o.vacuum_threshold, current_setting('autovacuum_vacuum_threshold')::float8)
                  + coalesce(o.vacuum_scale, current_setting('autovacuum_vacuum_scale_factor')::float8) * t.reltuples
                  AS vacuum_limit,
                coalesce(o.analyze_threshold, current_setting('autovacuum_analyze_threshold')::float8)
                  + coalesce(o.analyze_scale, current_setting('autovacuum_analyze_scale_factor')::float8) * t.reltuples
                  AS analyze_limit,
                coalesce(o.enabled, true) AS enabled,
                coalesce(o.cost_delay, current_setting('autovacuum_vacuum_cost_delay')) AS cost_delay
         FROM tables t
         CROSS JOIN LATERAL (
           SELECT max(option_value) FILTER (WHERE option_name = 'autovacuum_vacuum_threshold')::float8 AS vacuum_threshold,
                  max(option_value) FILTER (WHERE option_name = 'autovacuum_vacuum_scale_factor')::float8 AS vacuum_scale,
                  max(option_value) FILTER (WHERE option_name = 'autovacuum_analyze_threshold')::float8 AS analyze_threshold,
                  max(option_value) FILTER (WHERE option_name = 'autovacuum_analyze_scale_factor')::float8 AS analyze_scale,
                  max(option_value) FILTER (WHERE option_name = 'autovacuum_enabled')::boolean AS enabled,
                  max(option_value) FILTER (WHERE option_name = 'autovacuum_vacuum_cost_delay') AS cost_delay
           FROM pg_options_to_table(t.reloptions)
         ) o
       )
       SELECT relid::text AS relid, name, n_dead_tup > vacuum_limit AS vacuum, n_mod_since_analyze > analyze_limit AS analyze,
              CASE WHEN cost_delay = '-1' THEN current_setting('vacuum_cost_delay') ELSE cost_delay END AS "costDelay"
       FROM rules
       WHERE enabled AND (n_dead_tup > vacuum_limit OR n_mod_since_analyze > analyze_limit)
       ORDER BY greatest(n_dead_tup - vacuum_limit, n_mod_since_analyze - analyze_limit) DESC
       LIMIT 1`,
      [[...rested.keys()]],
    );
    return rows[0];
  }

  async function maintain(table: DueTable): Promise<void> {
    // VACUUM cannot run in a transaction block: one client, autocommit, its own lock timeout.
    const client = await deps.pool.connect();
    running = (client as unknown as { processID?: number }).processID ?? null;
    try {
      await client.query(
        `SELECT set_config('lock_timeout', '1s', false), set_config('vacuum_cost_delay', $1, false),
                set_config('vacuum_cost_limit', CASE WHEN current_setting('autovacuum_vacuum_cost_limit') = '-1'
                  THEN current_setting('vacuum_cost_limit') ELSE current_setting('autovacuum_vacuum_cost_limit') END, false)`,
        [table.costDelay],
      );
      const command = table.vacuum ? `VACUUM (PARALLEL 0${table.analyze ? ', ANALYZE' : ''})` : 'ANALYZE';
      const started = performance.now();
      await client.query(`/* worker:tableMaintenance */ ${command} ${table.name}`);
      deps.logger.debug(
        { table: table.name, command, ms: Math.round(performance.now() - started) },
        'table maintained',
      );
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === QUERY_CANCELED && interrupted) return;
      if (code !== LOCK_NOT_AVAILABLE) throw error;
      deps.logger.debug({ table: table.name }, 'table busy; maintenance skipped');
    } finally {
      running = null;
      await client.query('RESET lock_timeout; RESET vacuum_cost_delay; RESET vacuum_cost_limit').catch(() => undefined);
      client.release();
    }
  }

  return {
    name: 'table-maintenance',
    idleMs: 30_000,
    interrupt() {
      interrupted = true;
      if (running !== null) deps.pool.query('SELECT pg_cancel_backend($1)', [running]).catch(() => undefined);
    },
    async runOnce() {
      if (interrupted) return 0;
      if (!options.always && !(await autovacuumIsOff())) return 0;
      if (!announced && !options.always) {
        announced = true;
        deps.logger.info("the server's autovacuum is off: the worker analyzes and vacuums Gantry's tables itself");
      }
      const table = await nextDueTable();
      if (!table) return 0;
      rested.set(table.relid, Date.now() + restMs);
      await maintain(table);
      return 1;
    },
  };
}
