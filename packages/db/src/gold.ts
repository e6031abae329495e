import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '@gantry/logger';
import { dbDirectory } from './paths.ts';
import type { Queryable } from './pool.ts';
import type { StorageMode } from './storage-mode.ts';

/**
 * A gold relation: one SQL definition (db/gold/<name>.sql, with a `{{filter}}` slot in
 * its WHERE clause), materialized as a table (PostgreSQL mode; relations kept by
 * differences in both modes) or as a continuous aggregate (the others in TimescaleDB
 * mode), and run directly for live answers.
 */
export interface GoldRelation {
  name: string;
  /** Columns that identify one row (the bucket is always one of them). */
  key: string[];
  /** The column of the definition's source that filters by subject (asset or device). */
  subjectColumn: string;
  /** The source's time column, for range filters. */
  timeColumn: string;
  bucketWidth: string;
  /** The relation this one is rolled up from, if any (hierarchical aggregates). */
  rollupOf?: string;
  /**
   * A table kept by differences in the derivation transaction, in both storage modes
   * (services/worker/src/features/gold/deltas.ts), instead of from the invalidation log:
   * it is current with every committed derivation.
   */
  keptByDeltas?: boolean;
  /**
   * TimescaleDB refresh policy of a continuous aggregate: how far back each run looks and
   * how often it runs. (Relations kept by differences keep theirs only because it is part
   * of their definition hash: dropping it would rebuild PostgreSQL-mode gold for nothing.)
   */
  policy: { startOffset: string; endOffset: string; scheduleInterval: string };
}

export const goldRelations: GoldRelation[] = [
  {
    name: 'utilization_hourly',
    key: ['asset_id', 'bucket'],
    subjectColumn: 's.asset_id',
    timeColumn: 's.start_ts',
    bucketWidth: '1 hour',
    keptByDeltas: true,
    policy: { startOffset: '3 days', endOffset: '1 hour', scheduleInterval: '1 minute' },
  },
  {
    name: 'utilization_daily',
    key: ['asset_id', 'bucket'],
    subjectColumn: 'h.asset_id',
    timeColumn: 'h.bucket',
    bucketWidth: '1 day',
    rollupOf: 'utilization_hourly',
    keptByDeltas: true,
    policy: { startOffset: '7 days', endOffset: '1 day', scheduleInterval: '5 minutes' },
  },
  // PostgreSQL mode: kept by differences in ingest's batch transaction
  // (services/ingest/src/storage/positions.ts); the log and the refresh take replays and rebuilds.
  {
    name: 'positions_1min',
    key: ['asset_id', 'bucket'],
    subjectColumn: 'r.asset_id',
    timeColumn: 'r.ts',
    bucketWidth: '1 minute',
    policy: { startOffset: '3 days', endOffset: '1 minute', scheduleInterval: '1 minute' },
  },
  {
    name: 'positions_15min',
    key: ['asset_id', 'bucket'],
    subjectColumn: 'p.asset_id',
    timeColumn: 'p.bucket',
    bucketWidth: '15 minutes',
    rollupOf: 'positions_1min',
    policy: { startOffset: '3 days', endOffset: '15 minutes', scheduleInterval: '5 minutes' },
  },
];

const definitionCache = new Map<string, string>();

/**
 * The relation's SQL definition with `filter` placed in its WHERE clause, read from
 * `directory`/gold (the repository's db/ unless a migration is given another folder).
 */
export function goldDefinition(name: string, filter = 'TRUE', directory = dbDirectory): string {
  const file = path.join(directory, 'gold', `${name}.sql`);
  let template = definitionCache.get(file);
  if (template === undefined) {
    template = readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => !line.trimStart().startsWith('--'))
      .join('\n')
      .trim();
    definitionCache.set(file, template);
  }
  return template.replace('{{filter}}', `(${filter})`);
}

/**
 * The relation's figures computed straight from its base source (segments, readings or
 * messages) rather than from the relation a rollup is built on: the live path. The
 * filter applies to the base source's columns (e.g. `s.asset_id`, `s.start_ts`).
 */
export function liveDefinition(name: string, sourceFilter = 'TRUE'): string {
  const relation = goldRelation(name);
  if (!relation.rollupOf) return goldDefinition(name, sourceFilter);
  const inner = liveDefinition(relation.rollupOf, sourceFilter);
  const from = new RegExp(`\\bFROM ${relation.rollupOf}\\b`);
  const definition = goldDefinition(name);
  if (!from.test(definition)) throw new Error(`gold relation ${name} does not read FROM ${relation.rollupOf}`);
  return definition.replace(from, `FROM (${inner})`);
}

export function goldRelation(name: string): GoldRelation {
  const relation = goldRelations.find((candidate) => candidate.name === name);
  if (!relation) throw new Error(`unknown gold relation ${name}`);
  return relation;
}

/** What a relation is made as: a table wherever it is kept by differences or TimescaleDB is absent. */
function madeAsTable(relation: GoldRelation, mode: StorageMode): boolean {
  return mode === 'postgres' || relation.keptByDeltas === true;
}

function definitionHash(relation: GoldRelation, mode: StorageMode, directory: string): string {
  const hash = createHash('sha256')
    .update(mode)
    // Whether a table is kept by differences or from the log is not its shape: changing it does not recreate it.
    .update(JSON.stringify({ ...relation, keptByDeltas: undefined }))
    .update(goldDefinition(relation.name, 'TRUE', directory));
  // A table in TimescaleDB mode was a continuous aggregate before it was kept by
  // differences: naming it changes the hash, so an existing database converts. Every other
  // relation is what its mode always made, and keeps the hash it had.
  if (mode === 'timescaledb' && madeAsTable(relation, mode)) hash.update('table');
  return hash.digest('hex').slice(0, 16);
}

/**
 * Drops a gold relation, whatever it was made as: a table, or a continuous aggregate
 * (TimescaleDB shows one as a view over its materialization and drops it as a
 * materialized view).
 */
async function dropGoldRelation(client: Queryable, name: string, mode: StorageMode): Promise<void> {
  const { rows } = await client.query<{ kind: string }>(
    `SELECT relkind::text AS kind FROM pg_class WHERE oid = to_regclass($1)`,
    [name],
  );
  const kind = rows[0]?.kind;
  if (kind === undefined) return;
  const object =
    kind === 'r' || kind === 'p'
      ? 'TABLE'
      : kind === 'm' || (kind === 'v' && mode === 'timescaledb')
        ? 'MATERIALIZED VIEW'
        : 'VIEW';
  await client.query(`DROP ${object} ${name} CASCADE`);
}

/**
 * Creates each gold relation, or recreates it when its definition changed since it was
 * made, with every relation rolled up from it; the others stay as they are. A table is
 * shaped by the definition itself and marked for a full rebuild by the worker; the
 * continuous aggregates of TimescaleDB mode (positions) get their refresh policy.
 */
export async function installGoldRelations(
  client: Queryable,
  mode: StorageMode,
  logger?: Logger,
  directory = dbDirectory,
): Promise<void> {
  const { rows } = await client.query<{ key: string; value: string }>(
    `SELECT key, value #>> '{}' AS value FROM gantry_meta WHERE key LIKE 'gold:%'`,
  );
  const installed = new Map(rows.map((row) => [row.key.slice('gold:'.length), row.value]));
  const changed = new Set(
    goldRelations
      .filter((relation) => installed.get(relation.name) !== definitionHash(relation, mode, directory))
      .map((relation) => relation.name),
  );
  // A changed relation invalidates everything rolled up from it (a rollup is listed after its source).
  for (const relation of goldRelations)
    if (relation.rollupOf && changed.has(relation.rollupOf)) changed.add(relation.name);
  const toRebuild = goldRelations.filter((relation) => changed.has(relation.name));
  if (toRebuild.length === 0) return;

  for (const relation of [...toRebuild].reverse()) await dropGoldRelation(client, relation.name, mode);
  for (const relation of toRebuild) {
    const table = madeAsTable(relation, mode);
    logger?.info({ relation: relation.name, mode, table }, 'creating gold relation');
    if (table) await createGoldTable(client, relation, directory);
    else await createContinuousAggregate(client, relation, directory);
    await client.query(
      `INSERT INTO gantry_meta (key, value, updated_at) VALUES ($1, to_jsonb($2::text), now())
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
      [`gold:${relation.name}`, definitionHash(relation, mode, directory)],
    );
    // 'rebuild' asks the worker to fill a table with everything already in the source;
    // 'pending' has it refresh a continuous aggregate whole (its policy would too).
    await client.query(
      `INSERT INTO gold_coverage (relation, status) VALUES ($1, $2)
       ON CONFLICT (relation) DO UPDATE
         SET status = EXCLUDED.status, coverage_from = NULL, coverage_to = NULL, updated_at = NULL`,
      [relation.name, table ? 'rebuild' : 'pending'],
    );
  }
}

/**
 * Gold tables are updated in place batch after batch (the open bucket of each asset):
 * room on each page keeps those updates HOT, and fixed vacuum thresholds suit tables that
 * only grow (db/postgres/0431_gold_storage.sql says why and sets the same on tables made
 * before it).
 */
const GOLD_TABLE_STORAGE =
  'fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000, autovacuum_analyze_scale_factor = 0.02';

async function createGoldTable(client: Queryable, relation: GoldRelation, directory: string): Promise<void> {
  await client.query(
    `CREATE TABLE ${relation.name} WITH (${GOLD_TABLE_STORAGE}) AS ${goldDefinition(relation.name, 'FALSE', directory)} WITH NO DATA`,
  );
  await client.query(`ALTER TABLE ${relation.name} ADD PRIMARY KEY (${relation.key.join(', ')})`);
  // With the asset last, a page of a fleet in bucket-then-asset order walks the index and stops.
  await client.query(
    `CREATE INDEX ${relation.name}_tenant_bucket_idx ON ${relation.name} (tenant_id, bucket, asset_id)`,
  );
}

async function createContinuousAggregate(client: Queryable, relation: GoldRelation, directory: string): Promise<void> {
  await client.query(
    `CREATE MATERIALIZED VIEW ${relation.name}
       WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
       ${goldDefinition(relation.name, 'TRUE', directory)}
     WITH NO DATA`,
  );
  await client.query(`CREATE INDEX ${relation.name}_tenant_bucket_idx ON ${relation.name} (tenant_id, bucket)`);
  await client.query(
    `SELECT add_continuous_aggregate_policy($1::regclass,
       start_offset => $2::interval, end_offset => $3::interval, schedule_interval => $4::interval)`,
    [relation.name, relation.policy.startOffset, relation.policy.endOffset, relation.policy.scheduleInterval],
  );
}
