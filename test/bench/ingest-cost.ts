/**
 * `pnpm bench:ingest-cost` — the database work of one ingest message, by statement and by
 * table and index, on the write path as it is in this tree (docs/ingest.md, "Cost per
 * message"). A private database on the test server; no broker.
 *
 * For COST_BATCHES batches of 2,000 fleet messages (after a warm-up) it records, per
 * `/* ingest:… *\/` statement, the client-side time, and per relation the WAL its
 * transaction wrote (pg_walinspect, filtered by the transaction's xid, so the other users
 * of a shared server do not count), then the size each table and index grew by. One more
 * batch runs every statement under EXPLAIN (ANALYZE, BUFFERS, WAL) first (rolled back to
 * a savepoint) and prints the plan's time, buffers and WAL per statement.
 *
 * Env: GANTRY_BENCH_DATABASE_URL (default the test server), COST_BATCHES (25),
 * COST_WARMUP_BATCHES (25), COST_DEVICES (300), COST_BATCH_MESSAGES (2000), COST_METHOD (copy, the
 * default write method; or unnest).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { createPool, migrateDatabase, type Pool, type PoolClient } from '@gantry/db';
import { parseMessage, type ParsedMessage } from '@gantry/ingest';
import { encodeMessage, fleetTraffic } from '@gantry/simulator';
import { writeBatch } from '../../services/ingest/src/storage/write-batch.ts';

const BATCHES = Number(process.env.COST_BATCHES ?? 25);
const WARMUP = Number(process.env.COST_WARMUP_BATCHES ?? 25);
const DEVICES = Number(process.env.COST_DEVICES ?? 300);
const BATCH = Number(process.env.COST_BATCH_MESSAGES ?? 2000);
const METHOD = (process.env.COST_METHOD ?? 'copy') as 'unnest' | 'copy';
const serverUrl =
  process.env.GANTRY_BENCH_DATABASE_URL ??
  process.env.GANTRY_TEST_DATABASE_URL ??
  'postgresql://postgres@127.0.0.1:5432/postgres';

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

function tagOf(sql: string): string {
  return /\/\* ([\w:-]+) \*\//.exec(sql)?.[1] ?? sql.trim().split(/\s+/).slice(0, 2).join(' ');
}

interface StatementCost {
  ms: number;
  calls: number;
  walBytes: number;
  walRecords: number;
  fpiBytes: number;
}

/** A client whose queries are timed by tag and bracketed by WAL insert positions. */
function instrument(
  client: PoolClient,
  costs: Map<string, StatementCost>,
  marks: Array<{ tag: string; from: string; to: string }>,
  explain: Map<string, unknown> | null,
): PoolClient {
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
  const lsn = async () =>
    ((await query('SELECT pg_current_wal_insert_lsn()::text AS lsn')) as { rows: Array<{ lsn: string }> }).rows[0]!.lsn;
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver);
      const timed = async (...args: unknown[]) => {
        const first = args[0];
        const sql = typeof first === 'string' ? first : ((first as { text?: string }).text ?? 'COPY');
        const tag = tagOf(sql);
        if (explain && typeof first === 'string' && /^\s*(\/\*.*?\*\/\s*)?(INSERT|UPDATE|WITH)/is.test(sql)) {
          await query('SAVEPOINT cost_explain');
          const plan = (await query(`EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) ${sql}`, args[1])) as {
            rows: Array<{ 'QUERY PLAN': unknown }>;
          };
          explain.set(tag, plan.rows[0]!['QUERY PLAN']);
          await query('ROLLBACK TO SAVEPOINT cost_explain');
        }
        const from = await lsn();
        const started = performance.now();
        const result = await query(...args);
        const ms = performance.now() - started;
        const to = await lsn();
        marks.push({ tag, from, to });
        const cost = costs.get(tag) ?? { ms: 0, calls: 0, walBytes: 0, walRecords: 0, fpiBytes: 0 };
        cost.ms += ms;
        cost.calls += 1;
        costs.set(tag, cost);
        return result;
      };
      // A COPY stream must come back as it is, not wrapped in a promise.
      return (...args: unknown[]) => {
        if (typeof (args[0] as { write?: unknown } | null)?.write !== 'function') return timed(...args);
        const started = performance.now();
        const stream = query(...args) as unknown as NodeJS.EventEmitter;
        stream.once('finish', () => {
          const cost = costs.get('COPY') ?? { ms: 0, calls: 0, walBytes: 0, walRecords: 0, fpiBytes: 0 };
          cost.ms += performance.now() - started;
          cost.calls += 1;
          costs.set('COPY', cost);
        });
        return stream;
      };
    },
  });
}

async function relationSizes(pool: Pool): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ name: string; bytes: string }>(
    `SELECT c.relname AS name, pg_relation_size(c.oid)::text AS bytes FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')
     UNION ALL
    SELECT 'toast of ' || c.relname, pg_relation_size(c.reltoastrelid)::text FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.reltoastrelid <> 0`,
  );
  return new Map(rows.map((row) => [row.name, Number(row.bytes)]));
}

function parsedTraffic(deviceIds: string[], count: number, seed: number): ParsedMessage[] {
  const start = Date.now() - 6 * 3_600_000 + seed * 600_000;
  return [...fleetTraffic({ deviceIds, count, start, stepMs: 20, seed })].map((message) => {
    const { topic, payload } = encodeMessage(message);
    const receivedAt = Date.now();
    return parseMessage(
      { topic, payload: Buffer.from(payload), receivedAt },
      { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now: receivedAt } },
    );
  });
}

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const database = `gantry_bench_cost_${randomBytes(3).toString('hex')}_test`;
  await admin.query(`CREATE DATABASE ${database}`);
  const url = withDatabase(serverUrl, database);
  const pool = createPool(url, { max: 2, applicationName: 'gantry-bench-cost' });
  try {
    await migrateDatabase(url, { storageMode: 'postgres', retention: { bronzeDays: 14, readingDays: 400 } });
    await pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const run = randomBytes(2).toString('hex');
    const deviceIds = Array.from({ length: DEVICES }, (_, index) => `cost-${run}-${index + 1}`);
    const { rows: tenant } = await pool.query<{ id: string }>(
      `INSERT INTO tenants (name) VALUES ('Cost terminal') RETURNING id`,
    );
    const assets = await pool.query<{ id: string; identifier: string }>(
      `INSERT INTO assets (tenant_id, name, identifier) SELECT $1, id, id FROM unnest($2::text[]) AS id RETURNING id, identifier`,
      [tenant[0]!.id, deviceIds],
    );
    await pool.query(
      `INSERT INTO devices (tenant_id, device_id, asset_id) SELECT $1, d, a FROM unnest($2::text[], $3::uuid[]) AS u(d, a)`,
      [tenant[0]!.id, assets.rows.map((row) => row.identifier), assets.rows.map((row) => row.id)],
    );
    const messages = parsedTraffic(deviceIds, (WARMUP + BATCHES + 1) * BATCH, 1);
    const batches: ParsedMessage[][] = [];
    for (let index = 0; index < messages.length; index += BATCH) batches.push(messages.slice(index, index + BATCH));

    const write = async (
      batch: ParsedMessage[],
      costs: Map<string, StatementCost> | null,
      explain: Map<string, unknown> | null,
    ) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ xid: string }>('SELECT txid_current()::text AS xid');
        const marks: Array<{ tag: string; from: string; to: string }> = [];
        const measured = costs ? instrument(client, costs, marks, explain) : client;
        const started = performance.now();
        await writeBatch(measured, batch, { method: METHOD, oversizedPayloadBytes: 4096 });
        const from = (await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]!
          .lsn;
        await client.query('COMMIT');
        const commitMs = performance.now() - started;
        const to = (await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]!
          .lsn;
        marks.push({ tag: 'COMMIT', from, to });
        return { xid: rows[0]!.xid, marks, commitMs };
      } finally {
        client.release();
      }
    };

    for (const batch of batches.slice(0, WARMUP)) await write(batch, null, null);
    await pool.query('CHECKPOINT').catch(() => undefined);
    const before = await relationSizes(pool);
    const costs = new Map<string, StatementCost>();
    const byRelation = new Map<string, { bytes: number; records: number; fpi: number }>();
    const { rows: relnames } = await pool.query<{ relfilenode: string; name: string }>(
      `SELECT c.relfilenode::text, coalesce(t.relname || ' (toast)', c.relname) AS name FROM pg_class c
       LEFT JOIN pg_class t ON t.reltoastrelid = c.oid WHERE c.relfilenode <> 0`,
    );
    const nameOf = new Map(relnames.map((row) => [row.relfilenode, row.name]));
    let totalMs = 0;
    const load = os.loadavg()[0]!;
    for (const batch of batches.slice(WARMUP, WARMUP + BATCHES)) {
      const { xid, marks, commitMs } = await write(batch, costs, null);
      totalMs += commitMs;
      const first = marks[0]!.from;
      const last = marks[marks.length - 1]!.to;
      // pg_walinspect counts the 32-bit xid; txid_current() is epoch-qualified.
      const { rows: records } = await pool.query<{
        start_lsn: string;
        record_length: number;
        fpi_length: number;
        block_ref: string | null;
        resource_manager: string;
      }>(
        `SELECT start_lsn::text, record_length, fpi_length, block_ref, resource_manager
           FROM pg_get_wal_records_info($1::pg_lsn, least($2::pg_lsn, pg_current_wal_flush_lsn())) WHERE xid::text::bigint = ($3::bigint % 4294967296)`,
        [first, last, xid],
      );
      const lsnValue = (lsn: string) => {
        const [high, low] = lsn.split('/');
        return BigInt(`0x${high}`) * 4294967296n + BigInt(`0x${low}`);
      };
      for (const record of records) {
        const at = lsnValue(record.start_lsn);
        const mark = marks.find((candidate) => at >= lsnValue(candidate.from) && at < lsnValue(candidate.to));
        const tag = mark?.tag ?? 'COPY';
        const cost = costs.get(tag) ?? { ms: 0, calls: 0, walBytes: 0, walRecords: 0, fpiBytes: 0 };
        cost.walBytes += record.record_length;
        cost.walRecords += 1;
        cost.fpiBytes += record.fpi_length;
        costs.set(tag, cost);
        const relfilenode = /rel \d+\/\d+\/(\d+)/.exec(record.block_ref ?? '')?.[1];
        const relation = relfilenode
          ? (nameOf.get(relfilenode) ?? `relfilenode ${relfilenode}`)
          : `(${record.resource_manager})`;
        const entry = byRelation.get(relation) ?? { bytes: 0, records: 0, fpi: 0 };
        entry.bytes += record.record_length;
        entry.records += 1;
        entry.fpi += record.fpi_length;
        byRelation.set(relation, entry);
      }
    }
    const after = await relationSizes(pool);
    const explain = new Map<string, unknown>();
    await write(batches[WARMUP + BATCHES]!, new Map(), explain);

    const count = BATCHES * BATCH;
    const per = (value: number) => (value / count).toFixed(value / count < 10 ? 2 : 0);
    const out: string[] = [
      '',
      `Ingest cost per message — ${BATCHES} batches of ${BATCH} fleet messages (${DEVICES} devices) after ${WARMUP} warm-up batches, PostgreSQL mode`,
      `machine: ${os.cpus().length} cores, load average ${load.toFixed(1)} at start, ${os.loadavg()[0]!.toFixed(1)} at end (shared machine)`,
      `write + commit: ${(totalMs / BATCHES).toFixed(0)} ms per batch = ${Math.round(count / (totalMs / 1000)).toLocaleString('en-US')} msg/s on one connection`,
      '',
      'statement                         µs/msg   WAL B/msg  records/msg  (FPI B/msg)',
    ];
    for (const [tag, cost] of [...costs.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
      out.push(
        `${tag.padEnd(32)} ${((cost.ms * 1000) / count).toFixed(1).padStart(7)} ${per(cost.walBytes).padStart(11)} ${per(cost.walRecords).padStart(12)}  (${per(cost.fpiBytes)})`,
      );
    }
    out.push('', 'relation                                   WAL B/msg  records/msg  size growth B/msg');
    const names = new Set([...byRelation.keys(), ...after.keys()]);
    for (const name of [...names].sort((a, b) => (byRelation.get(b)?.bytes ?? 0) - (byRelation.get(a)?.bytes ?? 0))) {
      const wal = byRelation.get(name);
      const growth = (after.get(name) ?? 0) - (before.get(name) ?? 0);
      if (!wal && growth === 0) continue;
      out.push(
        `${name.padEnd(42)} ${per(wal?.bytes ?? 0).padStart(9)} ${per(wal?.records ?? 0).padStart(12)} ${per(growth).padStart(18)}`,
      );
    }
    out.push('', 'EXPLAIN (ANALYZE, BUFFERS, WAL) of one batch:');
    for (const [tag, plan] of explain) {
      const top = (plan as Array<{ Plan: Record<string, number>; 'Execution Time': number }>)[0]!;
      const node = top.Plan;
      out.push(
        `${tag.padEnd(32)} ${top['Execution Time'].toFixed(1).padStart(8)} ms  shared hit ${node['Shared Hit Blocks']} read ${node['Shared Read Blocks']} dirtied ${node['Shared Dirtied Blocks']}  WAL ${node['WAL Records']} records ${node['WAL Bytes']} B (FPI ${node['WAL FPI']})`,
      );
    }
    console.log(out.join('\n'));
  } finally {
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
