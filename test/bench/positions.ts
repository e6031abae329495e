/**
 * `pnpm bench:positions` — what keeping positions gold (positions_1min, positions_15min)
 * costs the database in PostgreSQL mode, the path before and the path now, in one run on
 * the same traffic (docs/derivation.md, "Positions").
 *
 * Two fresh databases gantry_positions_<x>_{before,now}_test on the test server (dropped
 * at the end), POSITIONS_DEVICES (1000) devices, one asset each, a valid fix from every
 * device every POSITIONS_GPS_EVERY_S (2) seconds of device time, written by ingest's
 * writeBatch in batches of POSITIONS_BATCH_MS (500) ms of traffic. Every
 * POSITIONS_PASS_S (5) seconds of traffic — a refresh pass of the worker's gold loop,
 * twelve a minute — for POSITIONS_MINUTES (4) minutes:
 *
 * - before: ingest without positions; the minutes of the pass's fixes logged per asset as
 *   the derivation worker logged them, then the gold loop's refresh (refreshGold, positions
 *   only): every open minute read again from silver, each pass.
 * - now: ingest adds the fixes to gold in its batch transaction (the `ingest:positionDeltas`
 *   statement, timed on the client), then the same refresh pass, which finds no log.
 *
 * The two alternate which goes first each pass. Printed: database time per pass and per
 * minute of traffic for each path and the ratio, with the load average beside each; at
 * the end both databases are checked against the definition recomputed from silver.
 * Env: GANTRY_BENCH_DATABASE_URL (default the test server).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { createPool, liveDefinition, migrateDatabase, type Pool, type PoolClient } from '@gantry/db';
import { parseMessage, type ParsedMessage } from '@gantry/ingest';
import { silentLogger } from '@gantry/logger';
import { positionsForBenchmarks } from '../../services/ingest/src/storage/positions.ts';
import { writeBatch } from '../../services/ingest/src/storage/write-batch.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { benchServerUrl, withDatabase } from '../support/database-url.ts';
import { provisionFleetBulk } from '../support/ingest.ts';
import { positiveSetting } from './settings.ts';

const DEVICES = positiveSetting('POSITIONS_DEVICES', 1000);
const GPS_EVERY_MS = positiveSetting('POSITIONS_GPS_EVERY_S', 2) * 1000;
const BATCH_MS = positiveSetting('POSITIONS_BATCH_MS', 500);
const PASS_MS = positiveSetting('POSITIONS_PASS_S', 5) * 1000;
const MINUTES = positiveSetting('POSITIONS_MINUTES', 4);
const MINUTE = 60_000;

const out = (line = '') => process.stdout.write(`${line}\n`);
const log = (message: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
const load = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');

type Path = 'before' | 'now';

interface Side {
  path: Path;
  url: string;
  pool: Pool;
  /** Database time of the positions work, ms: statements timed on the client. */
  ms: number;
  /** Of which: ingest:positionDeltas, the log insert, the refresh passes. */
  parts: { deltas: number; log: number; refresh: number };
  perPass: number[];
}

const proxies = new WeakMap<PoolClient, PoolClient>();

/**
 * A client whose `ingest:positionDeltas` statements add their time to the side; one per
 * connection (writeBatch keeps the storage mode per client object). Everything else,
 * a COPY stream included, passes through as it is.
 */
function timedDeltas(client: PoolClient, side: Side): PoolClient {
  const known = proxies.get(client);
  if (known) return known;
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const proxy = new Proxy(client, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver);
      return (...args: unknown[]) => {
        if (typeof args[0] !== 'string' || !args[0].includes('/* ingest:positionDeltas */')) return query(...args);
        const started = performance.now();
        return (query(...args) as Promise<unknown>).finally(() => {
          side.ms += performance.now() - started;
          side.parts.deltas += performance.now() - started;
        });
      };
    },
  });
  proxies.set(client, proxy);
  return proxy;
}

async function prepare(path: Path, serverUrl: string, deviceIds: string[]): Promise<Side> {
  const database = `gantry_positions_${randomBytes(3).toString('hex')}_${path}_test`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const url = withDatabase(serverUrl, database);
  await migrateDatabase(url, { storageMode: 'postgres', retention: { bronzeDays: 14, readingDays: 400 } });
  const pool = createPool(url, { max: 3, applicationName: `gantry-bench-positions-${path}` });
  await provisionFleetBulk(pool, deviceIds, 'Positions terminal');
  // Built (empty) once, as a running system's would be.
  await refreshGold({ pool, logger: silentLogger(), storageMode: 'postgres' }, { only: ['positions_1min'] });
  return { path, url, pool, ms: 0, parts: { deltas: 0, log: 0, refresh: 0 }, perPass: [] };
}

/** The fixes sent in [from, to): each device on its own phase, a short walk around the yard. */
function traffic(deviceIds: string[], from: number, to: number): ParsedMessage[] {
  const messages: ParsedMessage[] = [];
  deviceIds.forEach((deviceId, index) => {
    const phase = Math.floor((index * GPS_EVERY_MS) / deviceIds.length);
    const first = from + ((((phase - from) % GPS_EVERY_MS) + GPS_EVERY_MS) % GPS_EVERY_MS);
    for (let ts = first; ts < to; ts += GPS_EVERY_MS) {
      const step = ts / GPS_EVERY_MS;
      const payload = {
        ts,
        lat: 53.54 + index / 100_000 + Math.sin(step / 50) / 1000,
        lon: 9.96 + Math.cos(step / 50) / 1000,
        hdop: 1,
        speedKmh: 8,
      };
      const receivedAt = ts + 300;
      messages.push(
        parseMessage(
          { topic: `gantry/v1/devices/${deviceId}/gps`, payload: Buffer.from(JSON.stringify(payload)), receivedAt },
          { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now: receivedAt } },
        ),
      );
    }
  });
  return messages;
}

async function write(side: Side, messages: ParsedMessage[]): Promise<void> {
  const client = await side.pool.connect();
  try {
    await client.query('BEGIN');
    positionsForBenchmarks.enabled = side.path === 'now';
    await writeBatch(timedDeltas(client, side), messages, { method: 'copy', oversizedPayloadBytes: 4096 });
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    positionsForBenchmarks.enabled = true;
    client.release();
  }
}

/** What the derivation worker logged for the pass's fixes (the minutes of each asset's first to last fix). */
async function logLikeTheWorker(side: Side, from: number, to: number): Promise<void> {
  const started = performance.now();
  await side.pool.query(
    `/* worker:recordInvalidations */
     INSERT INTO gold_invalidations (relation, tenant_id, subject_id, bucket_start, bucket_end)
     SELECT 'positions_1min', tenant_id, asset_id, time_bucket(INTERVAL '1 minute', min(ts)),
            time_bucket(INTERVAL '1 minute', max(ts)) + INTERVAL '1 minute'
       FROM telemetry_readings WHERE type = 'gps' AND gps_valid AND ts >= $1 AND ts < $2
      GROUP BY tenant_id, asset_id`,
    [new Date(from), new Date(to)],
  );
  side.ms += performance.now() - started;
  side.parts.log += performance.now() - started;
}

async function refreshPass(side: Side, now: number): Promise<void> {
  const started = performance.now();
  for (let guard = 0; guard < 100; guard += 1) {
    const result = await refreshGold(
      { pool: side.pool, logger: silentLogger(), storageMode: 'postgres' },
      { now: () => now, only: ['positions_1min'] },
    );
    if (result.failed.length > 0) throw new Error(`${side.path}: positions refresh failed`);
    if (!result.more && result.busy.length === 0) break;
  }
  side.ms += performance.now() - started;
  side.parts.refresh += performance.now() - started;
}

async function pass(side: Side, from: number, deviceIds: string[]): Promise<void> {
  const before = side.ms;
  for (let at = from; at < from + PASS_MS; at += BATCH_MS) await write(side, traffic(deviceIds, at, at + BATCH_MS));
  if (side.path === 'before') await logLikeTheWorker(side, from, from + PASS_MS);
  await refreshPass(side, from + PASS_MS);
  side.perPass.push(side.ms - before);
}

async function drift(side: Side): Promise<number> {
  let rows = 0;
  for (const relation of ['positions_1min', 'positions_15min']) {
    const { rows: result } = await side.pool.query<{ n: number }>(
      `SELECT ((SELECT count(*) FROM (TABLE ${relation} EXCEPT ALL SELECT * FROM (${liveDefinition(relation)}) d) a)
             + (SELECT count(*) FROM (SELECT * FROM (${liveDefinition(relation)}) d EXCEPT ALL TABLE ${relation}) b))::int AS n`,
    );
    rows += result[0]!.n;
  }
  return rows;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const serverUrl = benchServerUrl();
  const run = randomBytes(2).toString('hex');
  const deviceIds = Array.from({ length: DEVICES }, (_, index) => `pos-${run}-${index + 1}`);
  const sides: Side[] = [];
  try {
    for (const path of ['before', 'now'] as const) sides.push(await prepare(path, serverUrl, deviceIds));
    const passes = Math.round((MINUTES * MINUTE) / PASS_MS);
    // Device time: the last POSITIONS_MINUTES before now, aligned to a minute.
    const start = Math.floor((Date.now() - MINUTES * MINUTE - MINUTE) / MINUTE) * MINUTE;
    const loads: string[] = [load()];
    log(`${passes} passes of ${PASS_MS / 1000} s of traffic, ${DEVICES} devices; load ${load()}`);
    for (let index = 0; index < passes; index += 1) {
      const from = start + index * PASS_MS;
      const order = index % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) await pass(side, from, deviceIds);
      if (index % 12 === 11) {
        loads.push(load());
        log(
          `minute ${(index + 1) / 12}: before ${sides[0]!.ms.toFixed(0)} ms, now ${sides[1]!.ms.toFixed(0)} ms; load ${load()}`,
        );
      }
    }
    loads.push(load());
    const fixes = ((MINUTES * MINUTE) / GPS_EVERY_MS) * DEVICES;
    out('');
    out(
      `bench:positions — PostgreSQL mode, ${DEVICES} devices (one asset each), a valid fix every ${GPS_EVERY_MS / 1000} s per device (${Math.round(DEVICES / (GPS_EVERY_MS / 1000))} fixes/s), ${MINUTES} min of traffic, a refresh pass every ${PASS_MS / 1000} s; ${os.cpus().length} cores, shared machine`,
    );
    out(`load average (1/5/15 min) at start, each minute, end: ${loads.join(' | ')}`);
    out('');
    out('path     database time   per minute   per pass p50 / p95    µs per fix   deltas / log / refresh');
    for (const side of sides) {
      out(
        `${side.path.padEnd(8)} ${`${side.ms.toFixed(0)} ms`.padStart(13)} ${`${(side.ms / MINUTES).toFixed(0)} ms`.padStart(12)}   ${`${percentile(side.perPass, 50).toFixed(1)} / ${percentile(side.perPass, 95).toFixed(1)} ms`.padStart(20)} ${((side.ms * 1000) / fixes).toFixed(1).padStart(13)}   ${[side.parts.deltas, side.parts.log, side.parts.refresh].map((v) => `${v.toFixed(0)}`).join(' / ')} ms`,
      );
    }
    out(`ratio now / before: ${(sides[1]!.ms / sides[0]!.ms).toFixed(3)}`);
    out('  before: the worker-style log insert and the refresh passes (every open minute read again from silver)');
    out('  now:    ingest:positionDeltas in the batch transactions and the refresh passes (no log to apply)');
    for (const side of sides) {
      const rows = await drift(side);
      out(
        `${side.path}: ${rows === 0 ? 'gold equals the definition recomputed from silver' : `${rows} rows differ from the definition`}`,
      );
      if (rows !== 0) process.exitCode = 1;
    }
  } finally {
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    for (const side of sides) {
      await side.pool.end();
      await admin.query(`DROP DATABASE IF EXISTS ${new URL(side.url).pathname.slice(1)}`);
    }
    await admin.end();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
