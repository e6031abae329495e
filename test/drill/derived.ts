import { loadConfig } from '@gantry/config';
import { createOutbox, liveDefinition, type Pool } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { counterDrift, counterTables } from '../../services/ingest/src/storage/counters.ts';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { type DrillReport, fmt } from './report.ts';

/**
 * "Derived figures equal to a clean run": once the worker has caught up, every derived
 * relation is copied aside; then the derived state is reset in the same database and
 * everything is derived again from the stored readings, in one go, with the worker's
 * own functions (deriveDirtyDevices, refreshGold), and both are compared row for row
 * (EXCEPT ALL both ways, so a changed digit in any column counts).
 */
export const DERIVED_RELATIONS = [
  'telemetry_segments',
  'usage_sessions',
  'identifier_sessions',
  'utilization_hourly',
  'utilization_daily',
  'positions_1min',
  'positions_15min',
] as const;

/** Headline figures, to print beside the row comparison. */
interface Headline {
  runningHours: number;
  distanceKm: number;
  containerCycles: number;
  usageSessions: number;
  identifierSessions: number;
  goldHours: number;
}

async function headline(pool: Pool, prefix = ''): Promise<Headline> {
  const { rows } = await pool.query<Record<keyof Headline, string>>(
    `SELECT (SELECT coalesce(sum(running_seconds), 0) / 3600 FROM ${prefix}utilization_daily) AS "runningHours",
            (SELECT coalesce(sum(distance_m), 0) / 1000 FROM ${prefix}telemetry_segments) AS "distanceKm",
            (SELECT coalesce(sum(container_cycles), 0) FROM ${prefix}telemetry_segments) AS "containerCycles",
            (SELECT count(*) FROM ${prefix}usage_sessions) AS "usageSessions",
            (SELECT count(*) FROM ${prefix}identifier_sessions) AS "identifierSessions",
            (SELECT count(*) FROM ${prefix}utilization_hourly) AS "goldHours"`,
  );
  const row = rows[0]!;
  return Object.fromEntries(Object.entries(row).map(([key, value]) => [key, Number(value)])) as unknown as Headline;
}

/**
 * Waits until the worker has nothing left: no dirty device, no unapplied gold
 * invalidation, no recheck due — twice, a gold refresh period apart. Throws after
 * `timeoutMs` (a hang guard).
 */
export async function waitForWorkerIdle(pool: Pool, report?: DrillReport, timeoutMs = 15 * 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastShown = Date.now();
  const busy = async () => {
    const { rows } = await pool.query<{ queue: number; invalidations: number; due: number }>(
      `SELECT (SELECT count(*) FROM derivation_queue)::int AS queue,
              (SELECT count(*) FROM gold_invalidations)::int AS invalidations,
              (SELECT count(*) FROM derivation_state WHERE recheck_at IS NOT NULL)::int AS due`,
    );
    return rows[0]!;
  };
  let quietSince: number | null = null;
  for (;;) {
    const state = await busy().catch(() => null);
    const quiet = state !== null && state.queue === 0 && state.invalidations === 0 && state.due === 0;
    if (!quiet) quietSince = null;
    else if (quietSince === null) quietSince = Date.now();
    else if (Date.now() - quietSince >= 7_000) return;
    if (Date.now() > deadline) throw new Error(`the worker did not catch up: ${JSON.stringify(state)}`);
    if (report && Date.now() - lastShown >= 60_000) {
      lastShown = Date.now();
      report.step('waiting for the worker', state ?? { database: 'not answering' });
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Copies every derived relation to drill_snapshot_<name>. */
export async function snapshotDerived(pool: Pool): Promise<void> {
  for (const relation of DERIVED_RELATIONS) {
    await pool.query(`DROP TABLE IF EXISTS drill_snapshot_${relation}`);
    await pool.query(`CREATE TABLE drill_snapshot_${relation} AS SELECT * FROM ${relation}`);
  }
}

/**
 * Forgets everything derivation and the gold refresher produced or remember (carry,
 * checkpoints, queue, invalidations, memberships, gold rows and coverage) and queues
 * every device with readings from its first one, as ingest would have.
 */
export async function resetDerivedState(pool: Pool): Promise<void> {
  await pool.query(`TRUNCATE telemetry_segments, usage_sessions, identifier_sessions, derivation_state, derivation_checkpoints,
                             derivation_queue, gold_invalidations, geofence_memberships,
                             utilization_hourly, utilization_daily, positions_1min, positions_15min`);
  await pool.query(`DELETE FROM geofence_alerts`);
  // 'rebuild' makes the refresher materialize each relation whole from its definition.
  await pool.query(
    `UPDATE gold_coverage SET status = 'rebuild', coverage_from = NULL, coverage_to = NULL, updated_at = NULL`,
  );
  await pool.query(
    `INSERT INTO derivation_queue (device_id, tenant_id, dirty_from)
     SELECT device_id, tenant_id, min(ts) FROM telemetry_readings GROUP BY device_id, tenant_id`,
  );
}

/** Derives every queued device and refreshes gold in this process, with the worker's own functions. */
export async function deriveEverything(pool: Pool, databaseUrl: string): Promise<{ runs: number; readings: number }> {
  const config = loadConfig({
    GANTRY_DATABASE_URL: databaseUrl,
    GANTRY_LOG_LEVEL: 'silent',
    GANTRY_LOG_FORMAT: 'json',
  });
  const deps = {
    pool,
    outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }),
    logger: silentLogger(),
    config,
  };
  let runs = 0;
  let readings = 0;
  for (;;) {
    const run = await deriveDirtyDevices(deps);
    if (run.devices === 0) break;
    runs += 1;
    readings += run.readings;
  }
  for (let step = 0; ; step += 1) {
    const result = await refreshGold({ pool, logger: silentLogger(), storageMode: 'postgres' });
    if (result.failed.length > 0) throw new Error(`gold refresh failed: ${result.failed.join(', ')}`);
    if (!result.more) break;
    if (step > 10_000) throw new Error('gold refresh did not finish');
  }
  return { runs, readings };
}

/**
 * Snapshot, reset, clean derivation, comparison — with the results in the report:
 * one count line per relation and one check for all of them.
 */
const GOLD_RELATIONS = ['utilization_hourly', 'utilization_daily', 'positions_1min', 'positions_15min'] as const;

/**
 * Whether each gold relation, as the worker left it, equals its own definition computed
 * now over the same segments and readings: a stale bucket (an invalidation lost or not
 * applied) shows here, apart from any difference in derivation. The drills' data is
 * hours old, so every hour is closed and the definition over everything is comparable.
 */
async function staleGoldRows(pool: Pool): Promise<Array<{ relation: string; stale: number }>> {
  const result: Array<{ relation: string; stale: number }> = [];
  for (const relation of GOLD_RELATIONS) {
    const live = liveDefinition(relation);
    const { rows } = await pool.query<{ stale: number }>(
      `SELECT ((SELECT count(*) FROM (SELECT * FROM ${relation} EXCEPT ALL ${live}) a)
             + (SELECT count(*) FROM (${live} EXCEPT ALL SELECT * FROM ${relation}) b))::int AS stale`,
    );
    result.push({ relation, stale: rows[0]!.stale });
  }
  return result;
}

export async function compareWithCleanRun(pool: Pool, databaseUrl: string, report: DrillReport): Promise<void> {
  // Ingest's traffic counters against a recount of the bronze and silver the drill left.
  const drift = await Promise.all(counterTables.map((table) => counterDrift(pool, table)));
  report.check(
    'traffic counters equal a recount of bronze and silver',
    drift.every((rows) => rows === 0),
    counterTables.map((table, index) => `${table}: ${drift[index]} rows differ`).join(', '),
  );
  const stale = await staleGoldRows(pool);
  const staleTotal = stale.reduce((sum, entry) => sum + entry.stale, 0);
  report.count('gold rows differing from their own source (drill)', staleTotal);
  report.check(
    'gold left by the worker matches its segments and readings',
    staleTotal === 0,
    staleTotal === 0
      ? `${GOLD_RELATIONS.length} relations up to date`
      : stale
          .filter((entry) => entry.stale > 0)
          .map((entry) => `${entry.relation}: ${entry.stale} rows`)
          .join(', '),
  );
  await snapshotDerived(pool);
  const drill = await headline(pool, 'drill_snapshot_');
  report.step('derived state copied aside; derived state reset, clean derivation in-process', {
    segments: await countRows(pool, 'drill_snapshot_telemetry_segments'),
  });
  await resetDerivedState(pool);
  const clean = await deriveEverything(pool, databaseUrl);
  report.step('clean derivation done', { 'derivation runs': clean.runs, 'readings derived': clean.readings });

  const differences: string[] = [];
  for (const relation of DERIVED_RELATIONS) {
    const { rows } = await pool.query<{ drill: number; clean: number; missing: number; extra: number }>(
      `SELECT (SELECT count(*) FROM drill_snapshot_${relation})::int AS drill,
              (SELECT count(*) FROM ${relation})::int AS clean,
              (SELECT count(*) FROM (SELECT * FROM ${relation} EXCEPT ALL SELECT * FROM drill_snapshot_${relation}) d)::int AS missing,
              (SELECT count(*) FROM (SELECT * FROM drill_snapshot_${relation} EXCEPT ALL SELECT * FROM ${relation}) d)::int AS extra`,
    );
    const row = rows[0]!;
    const differing = row.missing + row.extra;
    report.count(
      `${relation}: rows drill / clean / differing`,
      `${fmt(row.drill)} / ${fmt(row.clean)} / ${fmt(differing)}`,
    );
    if (differing > 0 || row.drill !== row.clean) {
      differences.push(
        `${relation} (${row.missing} clean rows absent from the drill, ${row.extra} drill rows absent from the clean run)`,
      );
      // A sample, to see which columns differ.
      const sample = async (from: string, minus: string) =>
        (
          await pool.query(
            `SELECT * FROM (SELECT * FROM ${from} EXCEPT ALL SELECT * FROM ${minus}) d ORDER BY 1, 2, 3 LIMIT 2`,
          )
        ).rows;
      for (const [side, rows] of [
        ['drill', await sample(`drill_snapshot_${relation}`, relation)],
        ['clean', await sample(relation, `drill_snapshot_${relation}`)],
      ] as const) {
        for (const entry of rows) console.log(`    ${relation} ${side} row: ${JSON.stringify(entry).slice(0, 600)}`);
      }
    }
  }
  const after = await headline(pool);
  const pair = (label: string, a: number, b: number, digits = 0) =>
    report.count(`${label} drill / clean`, `${a.toFixed(digits)} / ${b.toFixed(digits)}`);
  pair('running hours', drill.runningHours, after.runningHours, 3);
  pair('distance km', drill.distanceKm, after.distanceKm, 3);
  pair('container cycles', drill.containerCycles, after.containerCycles);
  pair('usage sessions', drill.usageSessions, after.usageSessions);
  pair('identifier sessions', drill.identifierSessions, after.identifierSessions);
  report.check(
    'derived figures equal a clean run',
    differences.length === 0 && drill.usageSessions > 0,
    differences.length === 0
      ? `${DERIVED_RELATIONS.length} relations identical row for row (${fmt(drill.goldHours)} gold hours, ${fmt(drill.usageSessions)} usage sessions)`
      : `differ: ${differences.join('; ')}`,
  );
}

async function countRows(pool: Pool, relation: string): Promise<number> {
  const { rows } = await pool.query<{ count: string }>(`SELECT count(*) AS count FROM ${relation}`);
  return Number(rows[0]!.count);
}
