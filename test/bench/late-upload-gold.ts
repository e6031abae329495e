/**
 * `pnpm bench:late-upload-gold` — how long after derivation has caught up with a late
 * upload its gold is complete, in each storage mode, both in one run (docs/derivation.md,
 * "Late uploads").
 *
 * Per mode a fresh database gantry_late_<mode>_<x>_test on the bench server (dropped at
 * the end unless LATE_KEEP_DATABASE=1), LATE_MACHINES (64) machines with one device each,
 * and the real worker (startWorker: derivation and gold loops) running while
 * LATE_DAYS (31) days of each machine's history (lifts, hourmeter, and a fix every minute
 * for machine 0 and every LATE_GPS_EVERY_MIN (5) minutes for the others:
 * test/support/late-upload.ts) arrive as store-and-forward batch messages through
 * ingest's writeBatch. Printed per mode: the upload's time and its transactions' p95 and
 * max, when derivation caught up (queue empty), then how long until gold was complete —
 * every minute of every machine in positions_1min, every quarter hour in
 * positions_15min, utilization_hourly and _daily equal to sums over the derived segments
 * (LATE_GIVE_UP_S, 900, gives up) — with the gold log left at that moment and the load
 * average beside each figure; at the end each relation is compared row for row with its
 * definition. The modes run one after the other (one 2-core machine: at the same time,
 * each would time the other's load). Env: GANTRY_BENCH_DATABASE_URL (default the test
 * server), LATE_MODES (postgres,timescaledb).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { loadConfig } from '@gantry/config';
import { createOutbox, createPool, goldDefinition, migrateDatabase, type Pool, type StorageMode } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { startWorker } from '../../services/worker/src/worker.ts';
import { benchServerUrl, withDatabase } from '../support/database-url.ts';
import { provisionFleetBulk } from '../support/ingest.ts';
import { lateHistory, uploadLate } from '../support/late-upload.ts';
import { positiveSetting } from './settings.ts';

const MACHINES = positiveSetting('LATE_MACHINES', 64);
const DAYS = positiveSetting('LATE_DAYS', 31);
const GPS_EVERY_MIN = positiveSetting('LATE_GPS_EVERY_MIN', 5);
const MODES = (process.env.LATE_MODES ?? 'postgres,timescaledb').split(',').map((mode) => mode.trim()) as StorageMode[];
/** Gives up waiting for gold after this long (it is a figure, not a hang). */
const GIVE_UP_MS = positiveSetting('LATE_GIVE_UP_S', 900) * 1000;
const KEEP = process.env.LATE_KEEP_DATABASE === '1';
const MINUTE = 60_000;

const out = (line = '') => process.stdout.write(`${line}\n`);
const log = (message: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
const load = () => `load ${os.loadavg()[0]!.toFixed(1)}`;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

interface Expected {
  minutes: number;
  quarters: number;
  hours: number;
  days: number;
  running: string;
  cycles: string;
}

/** What complete gold holds, from silver and the derived segments (read once derivation caught up). */
async function expected(pool: Pool, tenantId: string): Promise<Expected> {
  const { rows } = await pool.query<Expected>(
    `SELECT (SELECT count(DISTINCT (asset_id, time_bucket('1 minute', ts)))::int FROM telemetry_readings
              WHERE tenant_id = $1 AND type = 'gps' AND gps_valid) AS minutes,
            (SELECT count(DISTINCT (asset_id, time_bucket('15 minutes', ts)))::int FROM telemetry_readings
              WHERE tenant_id = $1 AND type = 'gps' AND gps_valid) AS quarters,
            (SELECT count(DISTINCT (asset_id, time_bucket('1 hour', start_ts)))::int FROM telemetry_segments WHERE tenant_id = $1) AS hours,
            (SELECT count(DISTINCT (asset_id, time_bucket('1 day', start_ts)))::int FROM telemetry_segments WHERE tenant_id = $1) AS days,
            (SELECT coalesce(sum(seconds::numeric) FILTER (WHERE running), 0)::text FROM telemetry_segments WHERE tenant_id = $1) AS running,
            (SELECT coalesce(sum(container_cycles), 0)::text FROM telemetry_segments WHERE tenant_id = $1) AS cycles`,
    [tenantId],
  );
  return rows[0]!;
}

/** What gold holds now, in the same terms. */
async function current(pool: Pool, tenantId: string): Promise<Expected> {
  const { rows } = await pool.query<Expected>(
    `SELECT (SELECT count(*)::int FROM positions_1min WHERE tenant_id = $1) AS minutes,
            (SELECT count(*)::int FROM positions_15min WHERE tenant_id = $1) AS quarters,
            (SELECT count(*)::int FROM utilization_hourly WHERE tenant_id = $1) AS hours,
            (SELECT count(*)::int FROM utilization_daily WHERE tenant_id = $1) AS days,
            (SELECT coalesce(sum(running_seconds), 0)::text FROM utilization_daily WHERE tenant_id = $1) AS running,
            (SELECT coalesce(sum(container_cycle_count), 0)::text FROM utilization_daily WHERE tenant_id = $1) AS cycles`,
    [tenantId],
  );
  return rows[0]!;
}

const same = (a: Expected, b: Expected) =>
  a.minutes === b.minutes &&
  a.quarters === b.quarters &&
  a.hours === b.hours &&
  a.days === b.days &&
  Number(a.running) === Number(b.running) &&
  Number(a.cycles) === Number(b.cycles);

/** Rows of the relation that differ from its definition run over the source now (both directions). */
async function differences(pool: Pool, relation: string): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM (
       (TABLE ${relation} EXCEPT ALL (${goldDefinition(relation)}))
       UNION ALL
       ((${goldDefinition(relation)}) EXCEPT ALL TABLE ${relation})) d`,
  );
  return rows[0]?.count ?? -1;
}

async function pendingLog(pool: Pool): Promise<string> {
  const { rows } = await pool.query<{ relation: string; count: number }>(
    `SELECT relation, count(*)::int AS count FROM gold_invalidations GROUP BY relation ORDER BY relation`,
  );
  return rows.length === 0 ? 'empty' : rows.map((row) => `${row.relation} ${row.count}`).join(', ');
}

async function runMode(mode: StorageMode): Promise<void> {
  const server = benchServerUrl();
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  const database = `gantry_late_${mode}_${randomBytes(3).toString('hex')}_test`;
  await admin.query(`CREATE DATABASE ${database}`);
  const url = withDatabase(server, database);
  let pool: Pool | null = null;
  try {
    await migrateDatabase(url, { storageMode: mode, retention: { bronzeDays: 14, readingDays: 400 } });
    pool = createPool(url, { max: 12, applicationName: 'gantry-bench-late' });
    // Every relation materialized once while empty, as a running installation has it.
    await refreshGold({ pool, logger: silentLogger(), storageMode: mode });
    const ids = Array.from({ length: MACHINES }, (_, i) => `late-${String(i).padStart(3, '0')}`);
    const fleet = await provisionFleetBulk(pool, ids, 'Late upload');
    const config = loadConfig({ GANTRY_DATABASE_URL: url, GANTRY_LOG_LEVEL: 'silent' });
    const end = Math.floor(Date.now() / MINUTE) * MINUTE - 10 * MINUTE;
    const history = lateHistory({
      deviceIds: ids,
      end,
      days: DAYS,
      gpsEveryMinutes: (index) => (index === 0 ? 1 : GPS_EVERY_MIN),
    });
    log(`${mode}: ${history.length} readings of ${MACHINES} machines × ${DAYS} days`);

    const worker = startWorker({
      config,
      pool,
      logger: silentLogger(),
      outbox: createOutbox({ maxAttempts: 3 }),
      storageMode: mode,
    });
    try {
      const started = performance.now();
      const upload = await uploadLate(pool, config, history, { uploadAt: Date.now() });
      const uploaded = performance.now();
      const sorted = [...upload.transactionMs].sort((a, b) => a - b);
      const p95 = sorted[Math.ceil(sorted.length * 0.95) - 1] ?? 0;
      out(
        `${mode}: uploaded ${upload.messages} batch messages (${history.length} readings) in ${seconds(uploaded - started)}, ingest transactions p95 ${p95.toFixed(0)} ms, max ${(sorted.at(-1) ?? 0).toFixed(0)} ms (${load()})`,
      );
      for (;;) {
        const { rows } = await pool.query<{ count: number }>(`SELECT count(*)::int AS count FROM derivation_queue`);
        if (rows[0]!.count === 0) break;
        await sleep(100);
      }
      const caughtUp = performance.now();
      // Gold is read every 200 ms from this moment on, while the expected figures (which
      // take seconds to compute) are worked out beside: the first read that matches them
      // is when gold was complete.
      const reads: Array<{ at: number; have: Expected }> = [];
      let wanted: Expected | null = null;
      const poll = (async () => {
        for (;;) {
          const at = performance.now();
          const have = await current(pool!, fleet.tenantId);
          reads.push({ at, have });
          if ((wanted !== null && same(have, wanted)) || at - caughtUp > GIVE_UP_MS) return;
          await sleep(200);
        }
      })();
      out(
        `${mode}: derivation caught up ${seconds(caughtUp - uploaded)} after the upload (${load()}); gold log: ${await pendingLog(pool)}`,
      );
      const want = await expected(pool, fleet.tenantId);
      wanted = want;
      let reported = 0;
      while (!reads.some((read) => same(read.have, want)) && performance.now() - caughtUp < GIVE_UP_MS) {
        const elapsed = performance.now() - caughtUp;
        if (Math.floor(elapsed / 10_000) > reported) {
          reported = Math.floor(elapsed / 10_000);
          const have = reads.at(-1)!.have;
          log(
            `${mode}: +${seconds(elapsed)} minutes ${have.minutes}/${want.minutes}, quarters ${have.quarters}/${want.quarters}, hours ${have.hours}/${want.hours}, days ${have.days}/${want.days}; log ${await pendingLog(pool)} (${load()})`,
          );
        }
        await sleep(200);
      }
      await poll;
      const first = reads.find((read) => same(read.have, want));
      out(
        first
          ? `${mode}: gold complete ${seconds(first.at - caughtUp)} after derivation caught up (first read: ${JSON.stringify(reads[0]!.have.minutes)} of ${want.minutes} minutes; ${load()})`
          : `${mode}: gold NOT complete ${seconds(GIVE_UP_MS)} after derivation caught up: ${JSON.stringify(reads.at(-1)!.have)} of ${JSON.stringify(want)} (${load()})`,
      );
    } finally {
      await worker.stop();
    }
    for (const relation of ['positions_1min', 'positions_15min', 'utilization_hourly', 'utilization_daily'])
      out(`${mode}: ${relation} rows differing from the definition: ${await differences(pool, relation)}`);
  } finally {
    await pool?.end();
    if (KEEP) log(`kept ${database}`);
    else await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

async function main(): Promise<void> {
  out(`bench:late-upload-gold — ${MACHINES} machines × ${DAYS} days, ${os.cpus().length} cores, ${load()} at start`);
  for (const mode of MODES) await runMode(mode);
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
