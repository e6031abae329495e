import {
  goldDefinition,
  goldRelation,
  withTransaction,
  type Pool,
  type PoolClient,
  type Queryable,
  type StorageMode,
} from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { canonicalDefinition, rebuildUtilizationCounts } from './deltas.ts';
import { goldMetrics } from './metrics.ts';

/**
 * How each gold relation is kept fresh. Utilization is kept by differences in the
 * derivation transaction (deltas.ts, both modes): its plan only rebuilds. Positions follow
 * the invalidation log, bucket by bucket, current bucket included: in TimescaleDB mode
 * the derivation worker logs the minutes of new fixes; in PostgreSQL mode ingest keeps
 * them by differences in its batch transaction (services/ingest/src/storage/positions.ts),
 * so the log holds only what those cannot express (a replay's minutes). (The traffic
 * counts are not gold: ingest keeps them, services/ingest/src/storage/counters.ts.)
 */
interface RefreshPlan {
  base: string;
  rollups: string[];
  /** The plan keeps the fleet rollup (db/migrations/0100_utilization_fleet.sql) with its relations. */
  fleet?: boolean;
}

const refreshPlans: RefreshPlan[] = [
  { base: 'utilization_hourly', rollups: ['utilization_daily'], fleet: true },
  { base: 'positions_1min', rollups: ['positions_15min'] },
];

export interface GoldDeps {
  pool: Pool;
  logger: Logger;
  storageMode: StorageMode;
}

export interface GoldRefreshOptions {
  /** Invalidation rows applied per relation and step. */
  batch?: number;
  now?: () => number;
  /** Only these base relations (tests and benchmarks refresh one plan alone). */
  only?: string[];
}

export interface GoldRefreshResult {
  applied: number;
  /** Some relation had more invalidations than one step takes. */
  more: boolean;
  /** The earliest bucket start the step refreshed from the log (epoch ms), or null. */
  earliest: number | null;
  failed: string[];
  /** Relations skipped because another refresher held them. */
  busy: string[];
}

const WIDTH_MS: Record<string, number> = {
  '1 minute': 60_000,
  '15 minutes': 900_000,
  '1 hour': 3_600_000,
  '1 day': 86_400_000,
};

function widthOf(relation: string): number {
  const width = WIDTH_MS[goldRelation(relation).bucketWidth];
  if (!width) throw new Error(`no bucket width for ${relation}`);
  return width;
}

const floorTo = (ms: number, width: number) => Math.floor(ms / width) * width;
const ceilTo = (ms: number, width: number) => Math.ceil(ms / width) * width;
const iso = (ms: number) => new Date(ms).toISOString();

interface Window {
  subject: string;
  from: number;
  to: number;
}

/** Aligns windows to the bucket width and merges overlapping ones per subject (or all, without subjects). */
function mergeWindows(windows: Window[], width: number, bySubject: boolean): Window[] {
  const groups = new Map<string, Window[]>();
  for (const window of windows) {
    const aligned = {
      subject: bySubject ? window.subject : '',
      from: floorTo(window.from, width),
      to: ceilTo(window.to, width),
    };
    if (aligned.to <= aligned.from) continue;
    const list = groups.get(aligned.subject) ?? [];
    list.push(aligned);
    groups.set(aligned.subject, list);
  }
  const merged: Window[] = [];
  for (const list of groups.values()) {
    list.sort((a, b) => a.from - b.from);
    let current: Window | undefined;
    for (const window of list) {
      if (current && window.from <= current.to) current.to = Math.max(current.to, window.to);
      else {
        current = { ...window };
        merged.push(current);
      }
    }
  }
  return merged;
}

interface CoverageState {
  status: string;
  coverageFrom: number | null;
  coverageTo: number | null;
}

async function readCoverage(db: Queryable, relation: string): Promise<CoverageState> {
  const { rows } = await db.query<{ status: string; coverage_from: Date | null; coverage_to: Date | null }>(
    `/* worker:readGoldCoverage */ SELECT status, coverage_from, coverage_to FROM gold_coverage WHERE relation = $1`,
    [relation],
  );
  const row = rows[0];
  return {
    status: row?.status ?? 'rebuild',
    coverageFrom: row?.coverage_from?.getTime() ?? null,
    coverageTo: row?.coverage_to?.getTime() ?? null,
  };
}

async function writeCoverage(
  db: Queryable,
  relation: string,
  values: { coverageFrom: number | null; coverageTo: number | null; durationMs: number; lowerFrom?: boolean },
): Promise<void> {
  await db.query(
    `/* worker:writeGoldCoverage */
     INSERT INTO gold_coverage AS c (relation, coverage_from, coverage_to, updated_at, status, last_duration_ms, last_error)
     VALUES ($1, $2, $3, now(), 'ok', $4, NULL)
     ON CONFLICT (relation) DO UPDATE SET
       coverage_from = CASE WHEN $5 THEN least(c.coverage_from, EXCLUDED.coverage_from) ELSE EXCLUDED.coverage_from END,
       coverage_to = EXCLUDED.coverage_to, updated_at = now(), status = 'ok',
       last_duration_ms = EXCLUDED.last_duration_ms, last_error = NULL`,
    [
      relation,
      values.coverageFrom === null ? null : iso(values.coverageFrom),
      values.coverageTo === null ? null : iso(values.coverageTo),
      Math.round(values.durationMs),
      values.lowerFrom ?? false,
    ],
  );
}

async function recordFailure(db: Queryable, relation: string, error: unknown): Promise<void> {
  await db.query(
    `/* worker:goldRefreshFailed */
     INSERT INTO gold_coverage AS c (relation, status, last_error) VALUES ($1, 'failed', $2)
     ON CONFLICT (relation) DO UPDATE SET status = CASE WHEN c.status IN ('rebuild', 'pending') THEN c.status ELSE 'failed' END,
       last_error = EXCLUDED.last_error`,
    [relation, error instanceof Error ? error.message.slice(0, 500) : String(error)],
  );
}

/** Applies one step of every relation's refresh; failures are recorded per relation and logged. */
export async function refreshGold(deps: GoldDeps, options: GoldRefreshOptions = {}): Promise<GoldRefreshResult> {
  const batch = options.batch ?? 20_000;
  const now = (options.now ?? Date.now)();
  const result: GoldRefreshResult = { applied: 0, more: false, earliest: null, failed: [], busy: [] };
  for (const plan of refreshPlans) {
    if (options.only && !options.only.includes(plan.base)) continue;
    const started = performance.now();
    try {
      const step = goldRelation(plan.base).keptByDeltas
        ? await rebuildIfNeeded(deps.pool, plan, { batch, now })
        : deps.storageMode === 'timescaledb'
          ? await refreshTimescalePlan(deps.pool, plan, { batch, now })
          : await applyLog(deps.pool, plan, { batch, now });
      if (step === null) {
        result.busy.push(plan.base);
        continue;
      }
      result.applied += step.applied;
      result.more ||= step.more;
      result.earliest = minOf(result.earliest, step.earliest ?? null);
      goldMetrics.invalidations.inc({ relation: plan.base }, step.applied);
      goldMetrics.refreshSeconds.observe(
        { relation: plan.base, kind: step.kind },
        (performance.now() - started) / 1000,
      );
    } catch (error) {
      result.failed.push(plan.base);
      goldMetrics.failures.inc({ relation: plan.base });
      deps.logger.error({ err: error, relation: plan.base }, 'gold refresh failed');
      await recordFailure(deps.pool, plan.base, error).catch(() => undefined);
    }
  }
  return result;
}

interface Step {
  applied: number;
  more: boolean;
  kind: 'rebuild' | 'incremental';
  earliest?: number | null;
}

interface StepOptions {
  batch: number;
  now: number;
}

// Tables (both modes for utilization, PostgreSQL mode for positions) ---------------------

/**
 * Relations kept by differences in the derivation transaction (deltas.ts) need the worker
 * only when installed, changed or never built (status not `ok`, the fleet rollup's too):
 * then they are rebuilt whole, under the exclusive side of the lock that derivations take
 * shared to apply differences, so every derivation is either in the rebuild or applied
 * after it.
 */
async function rebuildIfNeeded(pool: Pool, plan: RefreshPlan, options: StepOptions): Promise<Step> {
  const needed = async (db: Queryable) => {
    let gold = false;
    for (const relation of [plan.base, ...plan.rollups]) gold ||= (await readCoverage(db, relation)).status !== 'ok';
    const fleet = plan.fleet === true && (await readCoverage(db, FLEET)).status !== 'ok';
    return { gold, fleet };
  };
  const idle: Step = { applied: 0, more: false, kind: 'incremental' };
  const first = await needed(pool);
  if (!first.gold && !first.fleet) return idle;
  return withTransaction(pool, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`gantry:gold:${plan.base}`]);
    const now = await needed(client);
    if (now.gold) await rebuildTables(client, plan, options);
    else if (now.fleet) await rebuildFleet(client, 0);
    else return idle;
    return { applied: 0, more: false, kind: 'rebuild' };
  });
}

/** Every relation of the plan (and its fleet rollup) built again from its definition. */
async function rebuildTables(client: PoolClient, plan: RefreshPlan, options: StepOptions): Promise<void> {
  const started = performance.now();
  const deltas = goldRelation(plan.base).keptByDeltas === true;
  await client.query(`/* worker:goldRebuild */ DELETE FROM gold_invalidations WHERE relation = $1`, [plan.base]);
  for (const relation of [plan.base, ...plan.rollups]) {
    await client.query(`/* worker:goldRebuild */ DELETE FROM ${relation}`);
    const first = await client.query<{ first: Date | null }>(
      `/* worker:goldRebuild */
       WITH ins AS (INSERT INTO ${relation} ${deltas ? canonicalDefinition(relation) : goldDefinition(relation, 'TRUE')} RETURNING bucket)
       SELECT min(bucket) AS first FROM ins`,
    );
    await writeCoverage(client, relation, {
      coverageFrom: first.rows[0]?.first?.getTime() ?? null,
      coverageTo: ceilTo(options.now + 1, widthOf(relation)),
      durationMs: performance.now() - started,
    });
    // A rebuilt table's statistics describe the empty one: queries would plan for no rows.
    await client.query(`ANALYZE ${relation}`);
  }
  if (deltas) await rebuildUtilizationCounts(client);
  if (plan.fleet) await rebuildFleet(client, performance.now() - started);
}

/** One transaction: the relation and its rollups change together, with the log rows they apply (PostgreSQL mode). */
async function applyLog(pool: Pool, plan: RefreshPlan, options: StepOptions): Promise<Step | null> {
  return withTransaction(pool, async (client) => {
    const lock = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok`, [
      `gantry:gold:${plan.base}`,
    ]);
    if (!lock.rows[0]?.ok) return null;
    const started = performance.now();
    const coverage = await readCoverage(client, plan.base);
    if (coverage.status === 'rebuild' || coverage.status === 'pending') {
      await rebuildTables(client, plan, options);
      return { applied: 0, more: false, kind: 'rebuild' };
    }

    const log = await client.query<{ subject_id: string; bucket_start: Date; bucket_end: Date }>(
      `/* worker:takeInvalidations */
       DELETE FROM gold_invalidations WHERE id IN (
         SELECT id FROM gold_invalidations WHERE relation = $1 ORDER BY id LIMIT $2)
       RETURNING subject_id, bucket_start, bucket_end`,
      [plan.base, options.batch],
    );
    const baseWidth = widthOf(plan.base);
    const windows = mergeWindows(
      log.rows.map((row) => ({
        subject: row.subject_id,
        from: row.bucket_start.getTime(),
        to: row.bucket_end.getTime(),
      })),
      baseWidth,
      true,
    );
    const coverageTo = ceilTo(options.now + 1, baseWidth);
    let firstBucket: number | null = null;
    if (windows.length > 0) {
      firstBucket = minOf(firstBucket, await refreshSubjects(client, plan.base, windows));
      for (const rollup of plan.rollups) {
        await refreshSubjects(client, rollup, mergeWindows(windows, widthOf(rollup), true));
      }
    }
    const durationMs = performance.now() - started;
    await writeCoverage(client, plan.base, { coverageFrom: firstBucket, coverageTo, durationMs, lowerFrom: true });
    for (const rollup of plan.rollups) {
      await writeCoverage(client, rollup, {
        coverageFrom: firstBucket === null ? null : floorTo(firstBucket, widthOf(rollup)),
        coverageTo: ceilTo(options.now + 1, widthOf(rollup)),
        durationMs,
        lowerFrom: true,
      });
    }
    return {
      applied: log.rows.length,
      more: log.rows.length === options.batch,
      kind: 'incremental',
      earliest: windows.length > 0 ? Math.min(...windows.map((w) => w.from)) : null,
    };
  });
}

const minOf = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));

/** DELETE + INSERT of the given subjects' buckets from the relation's one definition. */
async function refreshSubjects(client: PoolClient, relation: string, windows: Window[]): Promise<number | null> {
  if (windows.length === 0) return null;
  const meta = goldRelation(relation);
  const subjectKey = meta.key[0]!;
  const params = [
    windows.map((w) => w.subject),
    windows.map((w) => iso(w.from)),
    windows.map((w) => iso(w.to)),
    iso(Math.min(...windows.map((w) => w.from))),
    iso(Math.max(...windows.map((w) => w.to))),
  ];
  await client.query(
    `/* worker:goldDeleteBuckets */
     DELETE FROM ${relation} g USING unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS w(subject, wfrom, wto)
      WHERE g.${subjectKey} = w.subject AND g.bucket >= w.wfrom AND g.bucket < w.wto
        AND g.bucket >= $4::timestamptz AND g.bucket < $5::timestamptz`,
    params,
  );
  const filter = `${meta.subjectColumn} = ANY ($1::uuid[]) AND ${meta.timeColumn} >= $4::timestamptz AND ${meta.timeColumn} < $5::timestamptz
    AND EXISTS (SELECT 1 FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS w(subject, wfrom, wto)
                WHERE w.subject = ${meta.subjectColumn} AND ${meta.timeColumn} >= w.wfrom AND ${meta.timeColumn} < w.wto)`;
  const { rows } = await client.query<{ first: Date | null }>(
    `/* worker:goldInsertBuckets */
     WITH ins AS (INSERT INTO ${relation} ${goldDefinition(relation, filter)} RETURNING bucket)
     SELECT min(bucket) AS first FROM ins`,
    params,
  );
  return rows[0]?.first?.getTime() ?? null;
}

// Fleet rollup ---------------------------------------------------------------------------

/** Coverage row of the fleet rollup: `ok` once built from gold, `rebuild` until then. */
const FLEET = 'utilization_fleet';
/** The whole rollup summed again from gold (after a gold rebuild, or when it was never built). */
async function rebuildFleet(client: Queryable, durationMs: number): Promise<void> {
  await client.query(`/* worker:fleetRebuild */ SELECT gantry_fleet_recompute(NULL, NULL, NULL)`);
  await client.query('ANALYZE utilization_fleet_hourly, utilization_fleet_daily');
  await writeCoverage(client, FLEET, { coverageFrom: null, coverageTo: null, durationMs });
}

// TimescaleDB mode -----------------------------------------------------------------------

/**
 * Continuous aggregates (positions) refreshed for exactly the windows the log names (the
 * policies stay as a safety net). refresh_continuous_aggregate cannot run in a
 * transaction, so the log rows are deleted after the refreshes succeeded: a crash in
 * between only refreshes those windows again.
 */
async function refreshTimescalePlan(pool: Pool, plan: RefreshPlan, options: StepOptions): Promise<Step | null> {
  const client = await pool.connect();
  const lockKey = `gantry:gold:${plan.base}`;
  let locked = false;
  try {
    const lock = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(hashtext($1)) AS ok`, [lockKey]);
    locked = lock.rows[0]?.ok === true;
    if (!locked) return null;
    const started = performance.now();
    const coverage = await readCoverage(client, plan.base);
    const relations = [plan.base, ...plan.rollups];

    if (coverage.status === 'pending' || coverage.status === 'rebuild') {
      const maxId = await client.query<{ id: number | null }>(
        `SELECT max(id) AS id FROM gold_invalidations WHERE relation = $1`,
        [plan.base],
      );
      for (const relation of relations) {
        await callRefresh(client, relation, null, null, pool);
      }
      await client.query(`DELETE FROM gold_invalidations WHERE relation = $1 AND id <= $2`, [
        plan.base,
        maxId.rows[0]?.id ?? 0,
      ]);
      for (const relation of relations) {
        const first = await client.query<{ first: Date | null }>(`SELECT min(bucket) AS first FROM ${relation}`);
        await writeCoverage(client, relation, {
          coverageFrom: first.rows[0]?.first?.getTime() ?? null,
          coverageTo: Math.max((await watermark(client, relation)) ?? 0, ceilTo(options.now + 1, widthOf(relation))),
          durationMs: performance.now() - started,
        });
      }
      return { applied: 0, more: false, kind: 'rebuild' };
    }

    const log = await client.query<{ id: number; bucket_start: Date; bucket_end: Date }>(
      `/* worker:readInvalidations */
       SELECT id, bucket_start, bucket_end FROM gold_invalidations WHERE relation = $1 ORDER BY id LIMIT $2`,
      [plan.base, options.batch],
    );
    const baseWidth = widthOf(plan.base);
    const windows = mergeWindows(
      log.rows.map((row) => ({ subject: '', from: row.bucket_start.getTime(), to: row.bucket_end.getTime() })),
      baseWidth,
      false,
    );
    // Slice by slice, each rollup right after its source: gold fills in as the step goes.
    for (const slice of slices(windows, baseWidth)) {
      await callRefresh(client, plan.base, slice.from, slice.to, pool);
      for (const rollup of plan.rollups) {
        const width = widthOf(rollup);
        await callRefresh(client, rollup, floorTo(slice.from, width), ceilTo(slice.to, width), pool);
      }
    }
    if (log.rows.length > 0) {
      await client.query(`DELETE FROM gold_invalidations WHERE id = ANY ($1::bigint[])`, [
        log.rows.map((row) => row.id),
      ]);
    }
    const durationMs = performance.now() - started;
    const first = windows.length > 0 ? Math.min(...windows.map((w) => w.from)) : null;
    for (const relation of relations) {
      // With the log applied, every bucket up to the current one matches the source (buckets
      // with no data are simply absent): the watermark alone would stop at the newest data.
      const materialized = await watermark(client, relation);
      await writeCoverage(client, relation, {
        coverageFrom: first === null ? null : floorTo(first, widthOf(relation)),
        coverageTo: Math.max(materialized ?? 0, ceilTo(options.now + 1, widthOf(relation))),
        durationMs,
        lowerFrom: true,
      });
    }
    return { applied: log.rows.length, more: log.rows.length === options.batch, kind: 'incremental', earliest: first };
  } finally {
    if (locked) await client.query(`SELECT pg_advisory_unlock(hashtext($1))`, [lockKey]).catch(() => undefined);
    client.release();
  }
}

/**
 * Buckets one refresh call materializes at most: a day of minutes, 15 days of quarter
 * hours, 60 days of hours — each call is one transaction, so a month uploaded late is
 * refreshed in bounded steps and never in one statement holding a month of rows.
 */
const SLICE_BUCKETS = 1440;

/**
 * The windows cut at multiples of SLICE_BUCKETS buckets since the epoch, newest first
 * (the history clients read first). Every rollup width divides a slice, so a rollup
 * refreshed over a slice reads only source buckets of that slice (or of none logged).
 */
function slices(windows: Window[], width: number): Window[] {
  const span = SLICE_BUCKETS * width;
  const result: Window[] = [];
  for (const window of windows) {
    for (let from = window.from; from < window.to; from = floorTo(from, span) + span)
      result.push({ subject: '', from, to: Math.min(window.to, floorTo(from, span) + span) });
  }
  return result.sort((a, b) => b.from - a.from);
}

/**
 * Whether this TimescaleDB's refresh_continuous_aggregate takes `options` (2.21 on).
 * From 2.28 a manual refresh cuts its window into batches of 10 buckets, one
 * transaction each — ~4,500 of them for a month of minutes, where the work is a few
 * seconds — unless `buckets_per_batch` says otherwise.
 */
const refreshTakesOptions = new WeakMap<Pool, Promise<boolean>>();

function takesOptions(pool: Pool, client: PoolClient): Promise<boolean> {
  let known = refreshTakesOptions.get(pool);
  if (!known) {
    known = client
      .query<{ ok: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'refresh_continuous_aggregate' AND pronargs >= 5) AS ok`,
      )
      .then((result) => result.rows[0]?.ok === true);
    known.catch(() => refreshTakesOptions.delete(pool));
    refreshTakesOptions.set(pool, known);
  }
  return known;
}

/**
 * A window (already a slice) refreshed in one pass (`buckets_per_batch` 0); a whole
 * relation (null bounds: installed or changed) in TimescaleDB's own batches of
 * SLICE_BUCKETS, which it cuts only where data or invalidations are.
 */
async function callRefresh(
  client: PoolClient,
  relation: string,
  from: number | null,
  to: number | null,
  pool: Pool,
): Promise<void> {
  const bounds = [relation, from === null ? null : iso(from), to === null ? null : iso(to)];
  if (!(await takesOptions(pool, client))) {
    await client.query(`CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz)`, bounds);
    return;
  }
  const batch = from === null && to === null ? SLICE_BUCKETS : 0;
  await client.query(
    `CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz, options => $4::jsonb)`,
    [...bounds, JSON.stringify({ buckets_per_batch: batch })],
  );
}

/** The end of the continuous aggregate's materialized range, or null when nothing is materialized. */
async function watermark(db: Queryable, relation: string): Promise<number | null> {
  const { rows } = await db.query<{ watermark: Date | null }>(
    `SELECT CASE WHEN w > 0 THEN TIMESTAMPTZ 'epoch' + w * INTERVAL '1 microsecond' END AS watermark
       FROM (SELECT _timescaledb_functions.cagg_watermark(mat_hypertable_id) AS w
               FROM _timescaledb_catalog.continuous_agg
              WHERE user_view_name = $1 AND user_view_schema = current_schema()) m`,
    [relation],
  );
  return rows[0]?.watermark?.getTime() ?? null;
}
