import type pg from 'pg';

const DAY_MS = 86_400_000;
/** Serialises maintenance across processes (migrate at every start, each worker's housekeeping). */
const PARTITIONS_LOCK_KEY = 7_364_019_224_552;

export interface RetentionDays {
  bronzeDays: number;
  readingDays: number;
}

interface PartitionedTable {
  table: string;
  column: string;
  retention: keyof RetentionDays;
}

/**
 * PostgreSQL mode's tables partitioned by time (db/postgres/0430_partitioned_time_series.sql):
 * one partition per UTC day, `<table>_pYYYYMMDD`, and `<table>_default` for any row whose
 * day has none.
 */
export const partitionedTables: readonly PartitionedTable[] = [
  { table: 'telemetry_readings', column: 'ts', retention: 'readingDays' },
  { table: 'device_message_batches', column: 'received_from', retention: 'bronzeDays' },
  { table: 'device_message_rows', column: 'received_at', retention: 'bronzeDays' },
];

export interface PartitionOptions {
  /** Without it nothing is dropped (migrate only creates). */
  retention?: RetentionDays;
  now?: number;
  /** Days after today that get their partition ahead of time. */
  aheadDays?: number;
  /** Days before today likewise (a reading that arrives a little late finds its day). */
  behindDays?: number;
  /** How long a step waits for its table lock before it gives up until the next pass. */
  lockTimeoutMs?: number;
}

export interface PartitionReport {
  created: string[];
  /** Detached and dropped: whole days past retention. */
  dropped: string[];
  /** Rows moved out of a default partition into the day partition made for them. */
  moved: number;
  /** Past-retention rows deleted from a default partition (the one place a row is deleted). */
  expiredInDefault: number;
  /** Steps that could not have their lock in time; the next pass does them. */
  skipped: string[];
}

/** The partition of `day` (a UTC midnight, ms). */
export function partitionName(table: string, day: number): string {
  return `${table}_p${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

const dayOfName = (table: string, name: string): number | null => {
  const match = new RegExp(`^${table}_p(\\d{4})(\\d{2})(\\d{2})$`).exec(name);
  return match ? Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) : null;
};

const floorDay = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Keeps PostgreSQL mode's partitioned tables in shape: a partition for each day of
 * [today − behindDays, today + aheadDays]; a partition for each day the default partition
 * holds rows of (moved there); and, with retention, every day partition whose whole day
 * is past the retention detached and dropped — no row of it deleted. Days before that
 * get a partition only when rows need one. Each step is its own short transaction and
 * waits at most `lockTimeoutMs` for its lock (attaching takes a lock that lets writers
 * on; detaching waits for the readers and writers of the table); a step that cannot
 * have its lock is left to the next pass. `client`: one connection, not in a transaction.
 */
export async function maintainPartitions(
  client: pg.ClientBase,
  options: PartitionOptions = {},
): Promise<PartitionReport> {
  const report: PartitionReport = { created: [], dropped: [], moved: 0, expiredInDefault: 0, skipped: [] };
  await client.query('SELECT pg_advisory_lock($1)', [PARTITIONS_LOCK_KEY]);
  try {
    for (const spec of partitionedTables) await maintainTable(client, spec, options, report);
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [PARTITIONS_LOCK_KEY]);
  }
  return report;
}

async function maintainTable(
  client: pg.ClientBase,
  spec: PartitionedTable,
  options: PartitionOptions,
  report: PartitionReport,
): Promise<void> {
  // A database whose migrations stop before the partitioned tables (migrated from another
  // schema folder, as the upgrade test does) has nothing to maintain.
  if (!(await isPartitioned(client, spec.table))) return;
  const now = options.now ?? Date.now();
  const cutoff = options.retention ? now - options.retention[spec.retention] * DAY_MS : Number.NEGATIVE_INFINITY;
  const expired = (day: number) => day + DAY_MS <= cutoff;
  const days = await existingDays(client, spec.table);
  for (const day of [...days].sort((a, b) => a - b).filter(expired)) {
    const name = partitionName(spec.table, day);
    if (await step(client, report, options, name, () => dropDay(client, spec, day))) report.dropped.push(name);
  }
  if (options.retention) {
    const deleted = await step(client, report, options, `${spec.table}_default`, () =>
      deleteExpiredInDefault(client, spec, cutoff),
    );
    report.expiredInDefault += deleted?.value ?? 0;
  }
  const wanted = new Set<number>();
  const today = floorDay(now);
  for (
    let day = today - (options.behindDays ?? 1) * DAY_MS;
    day <= today + (options.aheadDays ?? 7) * DAY_MS;
    day += DAY_MS
  )
    wanted.add(day);
  for (const day of await daysInDefault(client, spec)) wanted.add(day);
  for (const day of [...wanted].sort((a, b) => a - b)) {
    if (days.has(day) || expired(day)) continue;
    const name = partitionName(spec.table, day);
    const moved = await step(client, report, options, name, () => createDay(client, spec, day));
    if (moved) {
      report.created.push(name);
      report.moved += moved.value;
    }
  }
}

async function isPartitioned(client: pg.ClientBase, table: string): Promise<boolean> {
  const { rows } = await client.query<{ partitioned: boolean }>(
    `SELECT coalesce((SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass($1)), false) AS partitioned`,
    [table],
  );
  return rows[0]?.partitioned ?? false;
}

/**
 * Runs one step in a transaction with the lock timeout: its result, or null when its lock
 * was not had in time (the step is then left to the next pass).
 */
async function step<T>(
  client: pg.ClientBase,
  report: PartitionReport,
  options: PartitionOptions,
  name: string,
  work: () => Promise<T>,
): Promise<{ value: T } | null> {
  await client.query('BEGIN');
  try {
    await client.query(`SELECT set_config('lock_timeout', $1, true)`, [`${options.lockTimeoutMs ?? 2000}ms`]);
    const value = await work();
    await client.query('COMMIT');
    return { value };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    if ((error as { code?: string }).code !== '55P03') throw error;
    report.skipped.push(name);
    return null;
  }
}

async function existingDays(client: pg.ClientBase, table: string): Promise<Set<number>> {
  const { rows } = await client.query<{ name: string }>(
    `/* db:listPartitions */ SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = $1::regclass`,
    [table],
  );
  const days = new Set<number>();
  for (const row of rows) {
    const day = dayOfName(table, row.name);
    if (day !== null) days.add(day);
  }
  return days;
}

/** The UTC days of the rows the default partition holds (normally none: it is read whole). */
async function daysInDefault(client: pg.ClientBase, spec: PartitionedTable): Promise<number[]> {
  const { rows } = await client.query<{ day: Date }>(
    `/* db:defaultPartitionDays */ SELECT DISTINCT date_bin('1 day', ${spec.column}, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS day
       FROM ${spec.table}_default`,
  );
  return rows.map((row) => row.day.getTime());
}

/**
 * A new day partition: made apart and attached, which lets writers of the other days go on
 * (CREATE TABLE … PARTITION OF would wait for every one of them). The default partition's
 * rows of that day move into it first, under the lock attaching takes anyway.
 */
async function createDay(client: pg.ClientBase, spec: PartitionedTable, day: number): Promise<number> {
  const name = partitionName(spec.table, day);
  const range = [iso(day), iso(day + DAY_MS)];
  await client.query(`LOCK TABLE ${spec.table}_default IN ACCESS EXCLUSIVE MODE`);
  await client.query(`CREATE TABLE ${name} (LIKE ${spec.table} INCLUDING ALL)`);
  const moved = await client.query(
    `/* db:movePartitionRows */ WITH moved AS (
       DELETE FROM ${spec.table}_default WHERE ${spec.column} >= $1 AND ${spec.column} < $2 RETURNING *
     ) INSERT INTO ${name} SELECT * FROM moved`,
    range,
  );
  await client.query(
    `ALTER TABLE ${spec.table} ATTACH PARTITION ${name} FOR VALUES FROM ('${range[0]}') TO ('${range[1]}')`,
  );
  return moved.rowCount ?? 0;
}

async function dropDay(client: pg.ClientBase, spec: PartitionedTable, day: number): Promise<void> {
  const name = partitionName(spec.table, day);
  await client.query(`ALTER TABLE ${spec.table} DETACH PARTITION ${name}`);
  await client.query(`DROP TABLE ${name}`);
}

async function deleteExpiredInDefault(client: pg.ClientBase, spec: PartitionedTable, cutoff: number): Promise<number> {
  const { rowCount } = await client.query(
    `/* db:expireDefaultPartition */ DELETE FROM ${spec.table}_default WHERE ${spec.column} < $1`,
    [iso(cutoff)],
  );
  return rowCount ?? 0;
}
