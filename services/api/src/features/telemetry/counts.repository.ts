import { goldRelation, liveDefinition, readGoldCoverage, type GoldCoverage, type Queryable } from '@gantry/db';
import { idSetKey, PRESENT_MS, reachesPresent, sharedAnswers } from './shared-answers.ts';

// Per-device message and reading counts for any [from, to), from the hourly gold
// relations where they hold (whole hours before the coverage watermark, none pending)
// and from bronze/silver through the same definitions for the rest — the partial hours
// at both ends, everything past the watermark, and buckets still waiting for a refresh.

const HOUR_MS = 3_600_000;

/**
 * A range that reaches the present counts the open hour live, which scans every message
 * received in it: under heavy traffic identical questions share one answer, and a slow
 * answer is reused briefly (shared-answers.ts; at most 30 s, docs/telemetry-api.md).
 */
const presentAnswers = sharedAnswers<Record<string, unknown>[]>();

export interface CountsQuery {
  tenantId: string;
  deviceIds: string[];
  from: Date;
  to: Date;
}

export interface MessageCountRow {
  deviceId: string;
  messageType: string;
  messageCount: number;
  errorCount: number;
  parsedCount: number;
  timedCount: number;
  delayedCount: number;
}

export interface ReadingCountRow {
  deviceId: string;
  type: string;
  readingCount: number;
  validGpsCount: number;
}

interface CountSpec {
  relation: 'message_counts_hourly' | 'reading_counts_hourly';
  key: string;
  sums: string[];
}

async function hourlyCounts(
  db: Queryable,
  spec: CountSpec,
  query: CountsQuery,
): Promise<{ rows: Record<string, unknown>[]; coverage: GoldCoverage }> {
  const coverage = await readGoldCoverage(db, spec.relation);
  if (query.deviceIds.length === 0) return { rows: [], coverage };
  const relation = goldRelation(spec.relation);
  const alias = relation.subjectColumn.split('.')[0] as string;
  const from = query.from.getTime();
  const to = query.to.getTime();

  let goldFrom = Math.ceil(from / HOUR_MS) * HOUR_MS;
  let goldTo = Math.floor(to / HOUR_MS) * HOUR_MS;
  if (coverage.status === 'pending' || !coverage.coverageTo) goldTo = goldFrom;
  else goldTo = Math.min(goldTo, Math.floor(coverage.coverageTo.getTime() / HOUR_MS) * HOUR_MS);
  if (goldTo > goldFrom) {
    const pending = await db.query<{ first: Date | null }>(
      `/* api:countsPendingInvalidations */
       SELECT min(bucket_start) AS first FROM gold_invalidations
        WHERE relation = $1 AND tenant_id = $2 AND subject_id = ANY ($3::uuid[]) AND bucket_end > $4 AND bucket_start < $5`,
      [spec.relation, query.tenantId, query.deviceIds, new Date(goldFrom), new Date(goldTo)],
    );
    const first = pending.rows[0]?.first;
    if (first) goldTo = Math.max(goldFrom, Math.floor(first.getTime() / HOUR_MS) * HOUR_MS);
  }
  if (goldTo <= goldFrom) goldFrom = goldTo = from;

  const values: unknown[] = [
    query.tenantId,
    query.deviceIds,
    new Date(from),
    new Date(goldFrom),
    new Date(goldTo),
    new Date(to),
  ];
  const time = relation.timeColumn;
  const liveFilter = `${alias}.tenant_id = $1::uuid AND ${relation.subjectColumn} = ANY ($2::uuid[])
    AND ((${time} >= $3::timestamptz AND ${time} < $4::timestamptz) OR (${time} >= $5::timestamptz AND ${time} < $6::timestamptz))`;
  const columns = `device_id, ${spec.key}, ${spec.sums.join(', ')}`;
  const run = () =>
    db
      .query(
        `/* api:${spec.relation} */
     SELECT device_id, ${spec.key} AS key, ${spec.sums.map((column) => `sum(${column})::bigint AS ${column}`).join(', ')}
       FROM (
         SELECT ${columns} FROM ${spec.relation} g
          WHERE g.tenant_id = $1::uuid AND g.device_id = ANY ($2::uuid[]) AND g.bucket >= $4::timestamptz AND g.bucket < $5::timestamptz
         UNION ALL
         SELECT ${columns} FROM (${liveDefinition(spec.relation, liveFilter)}) live
       ) parts
      GROUP BY device_id, ${spec.key}`,
        values,
      )
      .then((result) => result.rows);
  if (!reachesPresent(to)) return { rows: await run(), coverage };
  // Default ranges move with the clock at both ends: questions within the same minute of
  // `from` are the same question.
  const minute = (ms: number) => Math.floor(ms / PRESENT_MS);
  const key = [
    spec.relation,
    query.tenantId,
    idSetKey(query.deviceIds),
    minute(from),
    minute(goldFrom),
    minute(goldTo),
  ].join('|');
  return { rows: await presentAnswers.get(key, run), coverage };
}

export async function readMessageCounts(
  db: Queryable,
  query: CountsQuery,
): Promise<{ rows: MessageCountRow[]; coverage: GoldCoverage }> {
  const result = await hourlyCounts(
    db,
    {
      relation: 'message_counts_hourly',
      key: 'message_type',
      sums: ['message_count', 'error_count', 'parsed_count', 'timed_count', 'delayed_count'],
    },
    query,
  );
  return {
    coverage: result.coverage,
    rows: result.rows.map((row) => ({
      deviceId: row.device_id as string,
      messageType: row.key as string,
      messageCount: Number(row.message_count ?? 0),
      errorCount: Number(row.error_count ?? 0),
      parsedCount: Number(row.parsed_count ?? 0),
      timedCount: Number(row.timed_count ?? 0),
      delayedCount: Number(row.delayed_count ?? 0),
    })),
  };
}

export async function readReadingCounts(
  db: Queryable,
  query: CountsQuery,
): Promise<{ rows: ReadingCountRow[]; coverage: GoldCoverage }> {
  const result = await hourlyCounts(
    db,
    { relation: 'reading_counts_hourly', key: 'type', sums: ['reading_count', 'valid_gps_count'] },
    query,
  );
  return {
    coverage: result.coverage,
    rows: result.rows.map((row) => ({
      deviceId: row.device_id as string,
      type: row.key as string,
      readingCount: Number(row.reading_count ?? 0),
      validGpsCount: Number(row.valid_gps_count ?? 0),
    })),
  };
}
