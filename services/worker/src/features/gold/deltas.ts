import { goldDefinition, UTILIZATION_SUM_COLUMNS, type Queryable } from '@gantry/db';

/**
 * Utilization gold is kept by differences, in both storage modes, in the derivation
 * transaction that changes telemetry_segments: the segments it deleted or overwrote are
 * taken away, the ones it wrote are added, per asset and hour (utilization_hourly), per
 * asset and day (utilization_daily) and in the fleet rollup. The cost follows the
 * segments that changed, not the hour's volume. Sums are numeric, so adding and taking
 * away leaves exactly what summing again gives. The `*_counts` tables (db/postgres/0150,
 * db/timescaledb/0490) count the segments behind each row and each filtered figure: a row
 * goes when its count reaches 0, a filtered figure is NULL when no segment matches its
 * filter, as in the definition.
 */

const HOURLY = 'utilization_hourly';
const SUMS = UTILIZATION_SUM_COLUMNS;

/** The definition's filtered figures, `sum(…) FILTER (WHERE condition) AS column`: NULL when nothing matches. */
function filteredFigures(): Array<{ column: string; condition: string }> {
  const found = [...goldDefinition(HOURLY).matchAll(/FILTER \(WHERE ([^)]*)\) AS (\w+)/g)].map((match) => ({
    condition: match[1]!,
    column: match[2]!,
  }));
  if (found.length === 0) throw new Error(`no filtered figures found in the ${HOURLY} definition`);
  return found;
}

const FILTERED = filteredFigures();
/** Columns of the counts tables: every segment, then one per filtered figure. */
const COUNTS = ['segments', ...FILTERED.map((figure) => figure.column)];
/** The count that says whether a figure has any segment (NULL when 0). */
const gate = (column: string) => (FILTERED.some((figure) => figure.column === column) ? column : 'segments');

/**
 * Per (tenant, asset, hour), the sums of the definition over the segments of `source`
 * (a table or CTE with telemetry_segments' columns), and the counts (`n_<column>`).
 */
function contributionsSql(source: string): string {
  const from = /\s+FROM telemetry_segments s\b/;
  const definition = goldDefinition(HOURLY);
  if (!from.test(definition)) throw new Error(`gold relation ${HOURLY} does not read FROM telemetry_segments s`);
  const counts = [
    'count(*) AS n_segments',
    ...FILTERED.map((figure) => `count(*) FILTER (WHERE ${figure.condition}) AS n_${figure.column}`),
  ].join(', ');
  return definition.replace(from, `, ${counts}\nFROM ${source} s`);
}

/** One (tenant, asset, hour)'s share of segments that were written (sign 1) or removed (−1). */
export interface UtilizationContribution {
  sign: 1 | -1;
  tenantId: string;
  assetId: string;
  bucket: Date;
  /** In COUNTS order. */
  counts: number[];
  /** Numeric sums as text (exact), in UTILIZATION_SUM_COLUMNS order. */
  sums: Array<string | null>;
}

export type ContributionRow = { tenant_id: string; asset_id: string; bucket: Date } & Record<string, unknown>;

/**
 * A SELECT of the contributions of the segments in `source`, for a statement that
 * returns them (`WITH gone AS (DELETE … RETURNING s.*) <this>`); read with toContributions.
 */
export function contributionsSelect(source: string): string {
  return `SELECT tenant_id, asset_id, bucket, ${COUNTS.map((c) => `n_${c}`).join(', ')}, ${SUMS.map((c) => `${c}::text AS ${c}`).join(', ')}
            FROM (${contributionsSql(source)}) contribution`;
}

/** Rows of contributionsSelect; without `sign`, each row's own `sign` column says. */
export function toContributions(rows: ContributionRow[], sign?: 1 | -1): UtilizationContribution[] {
  return rows.map((row) => ({
    sign: sign ?? (Number(row.sign) < 0 ? -1 : 1),
    tenantId: row.tenant_id,
    assetId: row.asset_id,
    bucket: row.bucket,
    counts: COUNTS.map((c) => Number(row[`n_${c}`])),
    sums: SUMS.map((c) => (row[c] as string | null) ?? null),
  }));
}

type Grain = 'hourly' | 'daily';

/**
 * One grain's whole change in one statement: the net differences per (asset, bucket) are
 * added to the counts first, then to the gold rows they guard, then to the fleet rows.
 * Lock order: counts rows in key order (a gold row is only ever changed by the holder of
 * its counts row), then fleet rows in key order (the fleet aggregate reads every counts
 * row first); the hourly statement runs before the daily one. Every derivation takes
 * them in that order, so concurrent derivations wait for each other but never deadlock.
 */
function deltaStatement(grain: Grain): string {
  const relation = `utilization_${grain}`;
  const bucket = grain === 'hourly' ? 'x.bucket' : `time_bucket(INTERVAL '1 day', x.bucket)`;
  const countParams = COUNTS.map((_c, i) => `$${5 + i}::bigint[]`);
  const sumParams = SUMS.map((_c, i) => `$${5 + COUNTS.length + i}::numeric[]`);
  return `/* worker:goldDeltas:${grain} */
WITH x AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::int[], ${[...countParams, ...sumParams].join(', ')})
    AS x(tenant_id, asset_id, bucket, sign, ${COUNTS.map((c) => `n_${c}`).join(', ')}, ${SUMS.join(', ')})
), d AS (
  -- Per asset and bucket, as gold is keyed (an asset's segments of one bucket under two
  -- tenants would otherwise make the upsert below touch a row twice).
  SELECT (array_agg(x.tenant_id ORDER BY x.sign DESC))[1] AS tenant_id, x.asset_id, ${bucket} AS bucket,
         ${COUNTS.map((c) => `sum(x.sign * x.n_${c})::bigint AS n_${c}`).join(', ')},
         ${SUMS.map((c) => `sum(x.sign * coalesce(x.${c}, 0)) AS ${c}`).join(', ')}
    FROM x GROUP BY 2, 3
), c AS (
  INSERT INTO ${relation}_counts AS c (asset_id, bucket, ${COUNTS.join(', ')})
  SELECT asset_id, bucket, ${COUNTS.map((c) => `n_${c}`).join(', ')} FROM d ORDER BY asset_id, bucket
  ON CONFLICT (asset_id, bucket) DO UPDATE SET ${COUNTS.map((c) => `${c} = c.${c} + EXCLUDED.${c}`).join(', ')}
  RETURNING c.*
), gold AS (
  INSERT INTO ${relation} AS g (tenant_id, asset_id, bucket, ${SUMS.join(', ')})
  SELECT d.tenant_id, d.asset_id, d.bucket, ${SUMS.map((s) => `CASE WHEN c.${gate(s)} > 0 THEN trim_scale(d.${s}) END`).join(', ')}
    FROM d JOIN c ON c.asset_id = d.asset_id AND c.bucket = d.bucket
   WHERE c.segments > 0
  ON CONFLICT (asset_id, bucket) DO UPDATE SET
    ${SUMS.map((s) => `${s} = CASE WHEN EXCLUDED.${s} IS NOT NULL THEN trim_scale(coalesce(g.${s}, 0) + EXCLUDED.${s}) END`).join(',\n    ')}
), gone AS (
  DELETE FROM ${relation} g USING c WHERE c.segments = 0 AND g.asset_id = c.asset_id AND g.bucket = c.bucket
), fleet AS (
  -- Member assets only; asset_count follows the gold rows that appear and vanish.
  INSERT INTO utilization_fleet_${grain} AS f (tenant_id, all_customers, customer_name, bucket, asset_count, ${SUMS.join(', ')})
  SELECT d.tenant_id, GROUPING(m.customer_name) = 1,
         CASE WHEN GROUPING(m.customer_name) = 1 THEN '' ELSE m.customer_name END, d.bucket,
         sum((c.segments > 0)::int - (c.segments - d.n_segments > 0)::int), ${SUMS.map((s) => `sum(d.${s})`).join(', ')}
    FROM d JOIN c ON c.asset_id = d.asset_id AND c.bucket = d.bucket
    JOIN fleet_members m ON m.asset_id = d.asset_id AND m.tenant_id = d.tenant_id
   GROUP BY GROUPING SETS ((d.tenant_id, d.bucket, m.customer_name), (d.tenant_id, d.bucket))
   ORDER BY 1, 2, 3, 4
  ON CONFLICT (tenant_id, all_customers, customer_name, bucket)
  DO UPDATE SET asset_count = f.asset_count + EXCLUDED.asset_count, ${SUMS.map((s) => `${s} = f.${s} + EXCLUDED.${s}`).join(', ')}
  RETURNING f.asset_count
), covered AS (
  -- Late data may reach before the first materialized bucket; otherwise this row is not touched.
  UPDATE gold_coverage k SET coverage_from = first.bucket
    FROM (SELECT min(bucket) AS bucket FROM c WHERE segments > 0) first
   WHERE k.relation = '${relation}' AND k.status = 'ok' AND (k.coverage_from IS NULL OR first.bucket < k.coverage_from)
)
SELECT coalesce((SELECT bool_or(segments = 0) FROM c), false) OR coalesce((SELECT bool_or(asset_count = 0) FROM fleet), false) AS zeros`;
}

const statements: Record<Grain, string> = { hourly: deltaStatement('hourly'), daily: deltaStatement('daily') };

/**
 * Applies the contributions (removed and written segments, any number per key) to
 * utilization gold, its counts and the fleet rollup. Runs in the derivation transaction,
 * under the shared side of the utilization lock: a gold rebuild and an asset moving
 * between fleets (db/migrations/0100) take it exclusively, so neither reads gold while
 * deltas change it. Taken after the transaction's segment writes, so it is held only
 * until the commit that follows.
 */
export async function applyUtilizationDeltas(
  client: Queryable,
  contributions: UtilizationContribution[],
): Promise<void> {
  if (contributions.length === 0) return;
  await client.query(
    `/* worker:goldDeltaLock */ SELECT pg_advisory_xact_lock_shared(hashtext('gantry:gold:utilization_hourly'))`,
  );
  const params = [
    contributions.map((c) => c.tenantId),
    contributions.map((c) => c.assetId),
    contributions.map((c) => c.bucket.toISOString()),
    contributions.map((c) => c.sign),
    ...COUNTS.map((_, i) => contributions.map((c) => c.counts[i])),
    ...SUMS.map((_, i) => contributions.map((c) => c.sums[i])),
  ];
  let zeros = false;
  for (const grain of ['hourly', 'daily'] as const) {
    const { rows } = await client.query<{ zeros: boolean }>(statements[grain], params);
    zeros ||= rows[0]?.zeros === true;
  }
  if (zeros) {
    // A bucket left without segments: its counts rows, and fleet rows left without assets.
    await client.query(
      `/* worker:goldDeltaCleanup */
       WITH h AS (DELETE FROM utilization_hourly_counts WHERE asset_id = ANY ($2::uuid[]) AND segments = 0),
            d AS (DELETE FROM utilization_daily_counts WHERE asset_id = ANY ($2::uuid[]) AND segments = 0),
            fh AS (DELETE FROM utilization_fleet_hourly WHERE tenant_id = ANY ($1::uuid[]) AND asset_count = 0)
       DELETE FROM utilization_fleet_daily WHERE tenant_id = ANY ($1::uuid[]) AND asset_count = 0`,
      [[...new Set(contributions.map((c) => c.tenantId))], [...new Set(contributions.map((c) => c.assetId))]],
    );
  }
}

/**
 * A relation's definition with its sums in canonical scale (trailing zeros trimmed), as
 * the differences store them: a numeric sum keeps the largest scale of what was ever
 * added, so without this the same value would read 450.000 after some histories and 450
 * after others. The rebuild inserts this, so gold is a function of the segments alone.
 */
export function canonicalDefinition(relation: string): string {
  return `SELECT tenant_id, asset_id, bucket, ${SUMS.map((c) => `trim_scale(${c}) AS ${c}`).join(', ')}
            FROM (${goldDefinition(relation, 'TRUE')}) definition`;
}

/** The counts of every bucket summed again from segments (the rebuild of utilization gold). */
export async function rebuildUtilizationCounts(client: Queryable): Promise<void> {
  const columns = COUNTS.join(', ');
  await client.query(`/* worker:goldRebuild */ DELETE FROM utilization_hourly_counts`);
  await client.query(
    `/* worker:goldRebuild */ INSERT INTO utilization_hourly_counts (asset_id, bucket, ${columns})
     SELECT asset_id, bucket, ${COUNTS.map((c) => `n_${c}`).join(', ')} FROM (${contributionsSql('telemetry_segments')}) c`,
  );
  await client.query(`/* worker:goldRebuild */ DELETE FROM utilization_daily_counts`);
  await client.query(
    `/* worker:goldRebuild */ INSERT INTO utilization_daily_counts (asset_id, bucket, ${columns})
     SELECT asset_id, time_bucket(INTERVAL '1 day', bucket), ${COUNTS.map((c) => `sum(${c})`).join(', ')}
       FROM utilization_hourly_counts GROUP BY 1, 2`,
  );
  await client.query('ANALYZE utilization_hourly_counts, utilization_daily_counts');
}
