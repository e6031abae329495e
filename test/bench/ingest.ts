/**
 * `pnpm bench:ingest` — the five figures of the ingest issue in one run, against a
 * private Mosquitto with the project's config and a fresh database on the test server:
 *   1. broker relay rate: simulator → Mosquitto → plain QoS 1 subscriber (no database);
 *   2. Gantry end-to-end: publish → committed in bronze + silver (counted in the database);
 *   3. naive baseline: one INSERT (and commit) per message before its PUBACK;
 *   4. readings/s of `batch` messages of 100 readings;
 *   5. ingest RSS (peak, its own process).
 * Plus the two bulk-write methods (unnest, COPY) on the same batches, database only, and
 * the physical limit: one plain COPY of the same silver rows into a table without any
 * index or key, with Gantry's ratio to it.
 * The machine may be shared: the load average and box CPU are printed with each figure, and
 * the CPU time per message of the ingest process and of its database backends, which
 * depends little on what else runs.
 *
 * Env: GANTRY_BENCH_DATABASE_URL (default the test server), BENCH_MESSAGES (200000),
 * BENCH_DEVICES (300), BENCH_NAIVE_SECONDS (15), BENCH_STORAGE_MODE (auto),
 * BENCH_PROFILE_DIR (CPU profile of the ingest process), BENCH_INGEST_NODE_FLAGS (e.g. heap sizes).
 *
 * BENCH_BROKER=nats measures the clustered path instead (docs/ingest.md, "Clustered
 * brokers"), on a private three-node NATS cluster from deploy/nats/node.conf, in one run:
 * the cluster's relay (simulator → cluster → a plain MQTT QoS 1 subscriber), then
 * Gantry end to end with 1 and with 2 ingest processes sharing the JetStream consumer.
 * BENCH_MESSAGES defaults to 50,000 there.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createPool, migrateDatabase, withTransaction, type Pool, type RequestedStorageMode } from '@gantry/db';
import { parseMessage, type ParsedMessage } from '@gantry/ingest';
import {
  createPublisher,
  encodeMessage,
  fleetTraffic,
  publishMessages,
  toBatches,
  type SimulatedMessage,
} from '@gantry/simulator';
import { copyText } from '../../services/ingest/src/storage/encode.ts';
import { silverColumns, toSilverRow, type DeviceRecord } from '../../services/ingest/src/storage/tables.ts';
import { copyEncoded, writeBatch } from '../../services/ingest/src/storage/write-batch.ts';
import { freePort, startTestBroker, type TestBroker } from '../support/broker.ts';
import { natsServerPath, startNatsCluster, type NatsCluster } from '../support/nats-cluster.ts';
import { nodeArguments, tsxArguments } from '../support/processes.ts';
import { cpuTimes } from './machine-cpu.ts';

const root = new URL('../..', import.meta.url).pathname;
const NATS = process.env.BENCH_BROKER === 'nats';
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? (NATS ? 50_000 : 200_000));
const DEVICES = Number(process.env.BENCH_DEVICES ?? 300);
const NAIVE_SECONDS = Number(process.env.BENCH_NAIVE_SECONDS ?? 15);
const STORAGE_MODE = (process.env.BENCH_STORAGE_MODE ?? 'auto') as RequestedStorageMode;
const serverUrl =
  process.env.GANTRY_BENCH_DATABASE_URL ??
  process.env.GANTRY_TEST_DATABASE_URL ??
  'postgresql://postgres@127.0.0.1:5432/postgres';

const now = () => performance.timeOrigin + performance.now();
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');
const cpuPer = (seconds: number, count: number) => ((seconds * 1e6) / count).toFixed(1);

/** Box CPU busy over a phase, in % of all cores (the machine may be shared). */
function busyMeter(): () => string {
  const start = cpuTimes();
  return () => {
    const end = cpuTimes();
    const busy = 100 * (1 - (end.idle - start.idle) / Math.max(1, end.total - start.total));
    return `box ${busy.toFixed(0)}% busy, load ${os.loadavg()[0]!.toFixed(1)}`;
  };
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** A child that has not exited this long after SIGTERM is killed. */
const CHILD_STOP_MS = 30_000;
/** The cleanup never takes longer than this: the process exits anyway (the database is private). */
const CLEANUP_MS = 90_000;

interface Child {
  process: ChildProcess;
  lines: string[];
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

/** A child process named `name` in errors: node with nodeOptions, then `args` (the script and its arguments). */
function startChild(name: string, args: string[], env: Record<string, string>, nodeOptions: string[] = []): Child {
  const child = spawn(process.execPath, [...nodeOptions, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  const collect = (chunk: Buffer) => {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    for (const wake of waiters.splice(0)) wake();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  return {
    process: child,
    lines,
    async waitFor(pattern, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = lines.find((candidate) => pattern.test(candidate));
        if (line) return line;
        if (child.exitCode !== null) throw new Error(`${name} exited: ${lines.slice(-5).join('\n')}`);
        if (Date.now() > deadline) throw new Error(`${name}: no ${pattern} within ${timeoutMs} ms`);
        await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), sleep(200)]);
      }
    },
    // A child killed by a signal has exitCode null (signalCode set): checking exitCode
    // alone made the second stop of the cleanup wait for an exit that had already happened.
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const killer = setTimeout(() => child.kill('SIGKILL'), CHILD_STOP_MS);
        child.once('exit', () => {
          clearTimeout(killer);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

async function count(pool: Pool, table: string): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${table}`);
  return rows[0]!.count;
}

/** Polls until the table holds `target` rows; returns the time it got there. */
async function whenCount(pool: Pool, table: string, target: number, timeoutMs = 600_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await count(pool, table)) >= target) return now();
    if (Date.now() > deadline) throw new Error(`${table} did not reach ${target} rows`);
    await sleep(100);
  }
}

function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kib('VmRSS') * 1024, peak: kib('VmHWM') * 1024 };
}

/** CPU seconds (user + system) a process has used; 0 once it is gone. */
function cpuSeconds(pid: number): number {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}
const CLOCK_TICKS = 100;

/**
 * CPU used by the ingest process and by its database backends over a phase: what a
 * message costs, which (unlike a rate) barely depends on what else the shared box runs.
 */
async function cpuMeter(
  pool: Pool,
  database: string,
  ingestPid: number,
): Promise<() => Promise<{ ingest: number; database: number }>> {
  const backends = async () => {
    const { rows } = await pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'gantry-ingest'`,
      [database],
    );
    return new Map(rows.map((row) => [row.pid, cpuSeconds(row.pid)]));
  };
  const ingestStart = cpuSeconds(ingestPid);
  const start = await backends();
  return async () => {
    const end = await backends();
    let database = 0;
    for (const [pid, seconds] of end) database += seconds - (start.get(pid) ?? 0);
    return { ingest: cpuSeconds(ingestPid) - ingestStart, database };
  };
}

async function provision(pool: Pool, deviceIds: string[]): Promise<void> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO tenants (name) VALUES ('Bench terminal') RETURNING id`,
  );
  const tenantId = rows[0]!.id;
  const assets = await pool.query<{ id: string; identifier: string }>(
    `INSERT INTO assets (tenant_id, name, identifier) SELECT $1, id, id FROM unnest($2::text[]) AS id RETURNING id, identifier`,
    [tenantId, deviceIds],
  );
  await pool.query(
    `INSERT INTO devices (tenant_id, device_id, asset_id) SELECT $1, d, a FROM unnest($2::text[], $3::uuid[]) AS u(d, a)`,
    [tenantId, assets.rows.map((row) => row.identifier), assets.rows.map((row) => row.id)],
  );
}

/**
 * The physical limit: the silver rows of these messages in one plain COPY (text format,
 * as the COPY write method sends them) into a table shaped like telemetry_readings with
 * no key and no index, committed. Returns rows/s.
 */
async function plainCopyRate(pool: Pool, messages: ParsedMessage[]): Promise<number> {
  const { rows } = await pool.query<{ device_id: string; id: string; tenant_id: string; asset_id: string | null }>(
    'SELECT device_id, id, tenant_id, asset_id FROM devices',
  );
  const devices = new Map<string, DeviceRecord>(
    rows.map((row) => [row.device_id, { id: row.id, tenantId: row.tenant_id, assetId: row.asset_id, enabled: true }]),
  );
  const silver = messages.flatMap((message) =>
    message.readings.map((reading) => toSilverRow(devices.get(message.deviceKey!)!, reading, message.raw.receivedAt)),
  );
  await pool.query('DROP TABLE IF EXISTS bench_plain_copy');
  await pool.query('CREATE TABLE bench_plain_copy (LIKE telemetry_readings)');
  // Encoded before the clock starts: the limit is the database's.
  const chunks: string[] = [];
  for (let index = 0; index < silver.length; index += 2000)
    chunks.push(copyText(silverColumns, silver.slice(index, index + 2000)));
  const client = await pool.connect();
  try {
    const began = now();
    await client.query('BEGIN');
    await copyEncoded(client, 'bench_plain_copy', silverColumns, chunks);
    await client.query('COMMIT');
    return silver.length / ((now() - began) / 1000);
  } finally {
    client.release();
    await pool.query('DROP TABLE IF EXISTS bench_plain_copy');
  }
}

async function truncate(pool: Pool): Promise<void> {
  await pool.query(
    'TRUNCATE telemetry_readings, device_message_batches, device_message_rows, device_state, derivation_queue',
  );
}

/** Starts a standalone ingest process and waits for its /healthz. */
async function startIngestProcess(env: Record<string, string>): Promise<Child> {
  const port = await freePort();
  const ingest = startChild('ingest', nodeArguments('ingest'), { ...env, GANTRY_INGEST_METRICS_PORT: String(port) });
  for (let attempt = 0; ; attempt += 1) {
    const status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) return ingest;
    if (ingest.process.exitCode !== null || attempt > 1200)
      throw new Error(`ingest did not start: ${ingest.lines.slice(-5).join('\n')}`);
    await sleep(100);
  }
}

/** BENCH_BROKER=nats: relay, then 1 and 2 ingest processes, on a three-node NATS cluster. */
async function natsClusterBench(): Promise<void> {
  const loadAtStart = os.loadavg();
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const database = `gantry_bench_nats_${randomBytes(3).toString('hex')}_test`;
  await admin.query(`CREATE DATABASE ${database}`);
  const databaseUrl = withDatabase(serverUrl, database);
  let cluster: NatsCluster | null = null;
  const children: Child[] = [];
  let pool: Pool | null = null;
  try {
    process.stderr.write(`migrating ${database}, starting 3 NATS nodes…\n`);
    const { storageMode } = await migrateDatabase(databaseUrl, {
      storageMode: STORAGE_MODE,
      retention: { bronzeDays: 14, readingDays: 400 },
    });
    pool = createPool(databaseUrl, { max: 4, applicationName: 'gantry-bench' });
    const run = randomBytes(2).toString('hex');
    const deviceIds = Array.from(
      { length: DEVICES },
      (_, index) => `bench-${run}-${String(index + 1).padStart(4, '0')}`,
    );
    await provision(pool, deviceIds);
    cluster = await startNatsCluster(3);
    const start = Date.now() - 6 * 3_600_000;
    const traffic = (seed: number): SimulatedMessage[] => [
      ...fleetTraffic({ deviceIds, count: MESSAGES, start: start + seed * 3_600_000, stepMs: 20, seed }),
    ];
    // Devices spread over the nodes: two connections starting on each.
    const publisher = await createPublisher({
      mqttUrl: cluster.mqttUrls[0]!,
      mqttUrls: cluster.mqttUrls,
      connections: 6,
      window: 1000,
    });

    // The cluster's relay: a plain QoS 1 subscriber on another node than most publishers.
    const plain = startChild('plain subscriber', tsxArguments('test/bench/ingest-plain-subscriber.ts'), {
      MQTT_URL: cluster.mqttUrls[1]!,
      MQTT_PROTOCOL_VERSION: '4',
      EXPECT: String(MESSAGES),
    });
    children.push(plain);
    await plain.waitFor(/^ready$/);
    let meter = busyMeter();
    let published = now();
    await publishMessages(publisher, traffic(1));
    const relay = JSON.parse(await plain.waitFor(/^\{/, 600_000)) as { received: number; lastAt: number };
    const relayRate = relay.received / ((relay.lastAt - published) / 1000);
    const relayLoad = meter();
    await plain.stop();

    const ingestEnv = {
      GANTRY_DATABASE_URL: databaseUrl,
      GANTRY_INGEST_SOURCE: 'nats',
      GANTRY_NATS_URLS: cluster.natsUrls.join(','),
      GANTRY_RUN_MIGRATIONS: 'false',
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_HOST: '127.0.0.1',
    };
    const rates: Array<{ processes: number; rate: number; load: string }> = [];
    for (const processes of [1, 2]) {
      await truncate(pool);
      while (children.filter((child) => child !== plain).length < processes)
        children.push(
          await startIngestProcess({
            ...ingestEnv,
            GANTRY_INGEST_CLIENT_ID: `gantry-bench-ingest-${run}-${children.length}`,
          }),
        );
      meter = busyMeter();
      published = now();
      await publishMessages(publisher, traffic(1 + processes));
      const done = await whenCount(pool, 'telemetry_readings', MESSAGES);
      rates.push({ processes, rate: MESSAGES / ((done - published) / 1000), load: meter() });
    }
    await publisher.close();
    console.log(
      [
        '',
        `Ingest benchmark on a three-node NATS cluster (deploy/nats/node.conf, nats-server ${natsVersion()}) — ${fmt(MESSAGES)} QoS 1 messages from ${DEVICES} devices over 6 connections spread over the nodes, ${storageMode} mode`,
        `machine: ${os.cpus().length} cores, load average ${loadAtStart.map((value) => value.toFixed(1)).join(' / ')} at start (shared machine: figures are indicative)`,
        '',
        `cluster relay (plain MQTT QoS 1 subscriber, no database) ${fmt(relayRate).padStart(8)} msg/s   [${relayLoad}]`,
        ...rates.map(
          ({ processes, rate, load }) =>
            `Gantry end to end, ${processes} ingest process${processes === 1 ? ' ' : 'es'}           ${fmt(rate).padStart(8)} msg/s   = ${(rate / relayRate).toFixed(2)} × relay   [${load}]`,
        ),
        `load average at the end ${os
          .loadavg()
          .map((value) => value.toFixed(1))
          .join(' / ')}`,
      ].join('\n'),
    );
  } finally {
    const watchdog = setTimeout(() => {
      console.error(`cleanup did not finish within ${CLEANUP_MS / 1000} s; exiting (database ${database} may be left)`);
      process.exit(1);
    }, CLEANUP_MS);
    watchdog.unref();
    for (const child of children) await child.stop();
    await cluster?.stop();
    await pool?.end();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

function natsVersion(): string {
  const binary = natsServerPath();
  return binary
    ? execFileSync(binary, ['--version'], { encoding: 'utf8' })
        .trim()
        .replace(/^nats-server: /, '')
    : '?';
}

async function main(): Promise<void> {
  if (NATS) return natsClusterBench();
  const loadAtStart = os.loadavg();
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const database = `gantry_bench_ingest_${randomBytes(3).toString('hex')}_test`;
  await admin.query(`CREATE DATABASE ${database}`);
  const databaseUrl = withDatabase(serverUrl, database);
  let broker: TestBroker | null = null;
  const children: Child[] = [];
  let pool: Pool | null = null;
  try {
    process.stderr.write(`migrating ${database}…\n`);
    const { storageMode } = await migrateDatabase(databaseUrl, {
      storageMode: STORAGE_MODE,
      retention: { bronzeDays: 14, readingDays: 400 },
    });
    pool = createPool(databaseUrl, { max: 4, applicationName: 'gantry-bench' });
    const run = randomBytes(2).toString('hex');
    const deviceIds = Array.from(
      { length: DEVICES },
      (_, index) => `bench-${run}-${String(index + 1).padStart(4, '0')}`,
    );
    await provision(pool, deviceIds);
    broker = await startTestBroker();

    const start = Date.now() - 6 * 3_600_000;
    const traffic = (seed: number): SimulatedMessage[] => [
      ...fleetTraffic({ deviceIds, count: MESSAGES, start: start + seed * 3_600_000, stepMs: 20, seed }),
    ];
    const sample = traffic(0).slice(0, 1000);
    const averageBytes =
      sample.reduce((sum, message) => sum + Buffer.byteLength(encodeMessage(message).payload), 0) / sample.length;
    const publisher = await createPublisher({ mqttUrl: broker.url, connections: 2, window: 2000 });

    // 1. Broker relay rate.
    const plain = startChild('plain subscriber', tsxArguments('test/bench/ingest-plain-subscriber.ts'), {
      MQTT_URL: broker.url,
      EXPECT: String(MESSAGES),
    });
    children.push(plain);
    await plain.waitFor(/^ready$/);
    let meter = busyMeter();
    const relayMessages = traffic(1);
    let published = now();
    await publishMessages(publisher, relayMessages);
    const relay = JSON.parse(await plain.waitFor(/^\{/)) as { received: number; lastAt: number };
    const relayRate = relay.received / ((relay.lastAt - published) / 1000);
    const relayLoad = meter();
    await plain.stop();

    // 2. Gantry end to end, 5. its RSS.
    const ingestEnv = {
      GANTRY_DATABASE_URL: databaseUrl,
      GANTRY_MQTT_URL: broker.url,
      GANTRY_RUN_MIGRATIONS: 'false',
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_HOST: '127.0.0.1',
      GANTRY_INGEST_CLIENT_ID: `gantry-bench-ingest-${run}`,
      GANTRY_INGEST_SHARED_GROUP: `bench-${run}`,
      GANTRY_INGEST_METRICS_PORT: String(await freePort()),
    };
    // BENCH_PROFILE_DIR=/some/dir writes a CPU profile of the ingest process there.
    const profile = process.env.BENCH_PROFILE_DIR
      ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`]
      : [];
    const nodeFlags = (process.env.BENCH_INGEST_NODE_FLAGS ?? '').split(' ').filter(Boolean);
    const ingest = startChild('ingest', nodeArguments('ingest'), ingestEnv, [...profile, ...nodeFlags]);
    children.push(ingest);
    for (let attempt = 0; ; attempt += 1) {
      const status = await fetch(`http://127.0.0.1:${ingestEnv.GANTRY_INGEST_METRICS_PORT}/healthz`).then(
        (response) => response.status,
        () => 0,
      );
      if (status === 200) break;
      if (ingest.process.exitCode !== null || attempt > 600)
        throw new Error(`ingest did not start: ${ingest.lines.slice(-5).join('\n')}`);
      await sleep(100);
    }
    const rssIdle = rssOf(ingest.process.pid!).rss;
    let rssMax = 0;
    const rssTimer = setInterval(() => {
      rssMax = Math.max(rssMax, rssOf(ingest.process.pid!).rss);
    }, 100);
    meter = busyMeter();
    let cpu = await cpuMeter(pool, database, ingest.process.pid!);
    published = now();
    await publishMessages(publisher, traffic(2));
    const e2eDone = await whenCount(pool, 'telemetry_readings', MESSAGES);
    const e2eRate = MESSAGES / ((e2eDone - published) / 1000);
    const e2eLoad = meter();
    const e2eCpu = await cpu();
    const bronzeRows = await count(pool, 'device_messages');

    // 4. Batch uploads of 100 readings.
    await truncate(pool);
    const batchMessages = toBatches(traffic(3), { size: 100, uploadAt: Date.now() });
    meter = busyMeter();
    cpu = await cpuMeter(pool, database, ingest.process.pid!);
    published = now();
    await publishMessages(publisher, batchMessages);
    const batchDone = await whenCount(pool, 'telemetry_readings', MESSAGES);
    const batchRate = MESSAGES / ((batchDone - published) / 1000);
    const batchLoad = meter();
    const batchCpu = await cpu();
    clearInterval(rssTimer);
    const rss = rssOf(ingest.process.pid!);
    rssMax = Math.max(rssMax, rss.rss);
    await ingest.stop();

    // 3. Naive baseline: one INSERT per message, for a fixed time.
    await truncate(pool);
    const naive = startChild('naive baseline', tsxArguments('test/bench/ingest-naive-baseline.ts'), {
      DATABASE_URL: databaseUrl,
      MQTT_URL: broker.url,
    });
    children.push(naive);
    await naive.waitFor(/^ready$/);
    meter = busyMeter();
    const naiveStart = now();
    const naivePublishing = publishMessages(publisher, traffic(4).slice(0, 10_000 * NAIVE_SECONDS));
    await sleep(NAIVE_SECONDS * 1000);
    const naiveStored = await count(pool, 'telemetry_readings');
    const naiveRate = naiveStored / ((now() - naiveStart) / 1000);
    const naiveLoad = meter();
    await naive.stop();
    await naivePublishing.catch(() => undefined);

    // The two bulk-write methods on identical pre-parsed batches, database only, then the physical limit.
    const methods: Record<string, number> = {};
    const methodLoad: Record<string, string> = {};
    let copyLimit = 0;
    let copyLoad = '';
    for (const method of ['unnest', 'copy', 'unnest', 'copy', 'limit'] as const) {
      await truncate(pool);
      const messages: ParsedMessage[] = traffic(5)
        .slice(0, 100_000)
        .map((message) => {
          const { topic, payload } = encodeMessage(message);
          const receivedAt = Date.now();
          return parseMessage(
            { topic, payload: Buffer.from(payload), receivedAt },
            { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now: receivedAt } },
          );
        });
      meter = busyMeter();
      if (method === 'limit') {
        copyLimit = await plainCopyRate(pool, messages);
        copyLoad = meter();
        continue;
      }
      const began = now();
      for (let index = 0; index < messages.length; index += 2000) {
        await withTransaction(pool, (client) =>
          writeBatch(client, messages.slice(index, index + 2000), { method, oversizedPayloadBytes: 4096 }),
        );
      }
      const rate = messages.length / ((now() - began) / 1000);
      if (rate > (methods[method] ?? 0)) methodLoad[method] = meter();
      methods[method] = Math.max(methods[method] ?? 0, rate);
    }
    const best = Math.max(methods.unnest!, methods.copy!);

    await publisher.close();
    const lines = [
      '',
      `Ingest benchmark — ${MESSAGES.toLocaleString('en-US')} QoS 1 messages of ~${Math.round(averageBytes)} bytes from ${DEVICES} devices, Mosquitto with deploy/mosquitto/mosquitto.conf, ${storageMode} mode`,
      `machine: ${os.cpus().length} cores, load average ${loadAtStart.map((value) => value.toFixed(1)).join(' / ')} at start (shared machine: figures are indicative)`,
      '',
      `1. broker relay rate (plain subscriber, no database) ${fmt(relayRate).padStart(10)} msg/s   [${relayLoad}]`,
      `2. Gantry end to end (bronze + silver committed)    ${fmt(e2eRate).padStart(10)} msg/s   = ${(e2eRate / relayRate).toFixed(2)} × relay; ${fmt(bronzeRows)} bronze rows   [${e2eLoad}]`,
      `3. naive baseline (one INSERT per message)          ${fmt(naiveRate).padStart(10)} msg/s   = Gantry is ${(e2eRate / naiveRate).toFixed(0)} × faster   [${naiveLoad}]`,
      `4. batch messages of 100 readings                   ${fmt(batchRate).padStart(10)} readings/s   (${fmt(batchMessages.length)} messages)   [${batchLoad}]`,
      `   CPU per message end to end: ingest ${cpuPer(e2eCpu.ingest, MESSAGES)} µs, its database backends ${cpuPer(e2eCpu.database, MESSAGES)} µs; per reading of the batch uploads: ingest ${cpuPer(batchCpu.ingest, MESSAGES)} µs, database ${cpuPer(batchCpu.database, MESSAGES)} µs`,
      `5. ingest RSS                                       ${(rssMax / 1048576).toFixed(0).padStart(10)} MiB at most while running (${(rssIdle / 1048576).toFixed(0)} MiB idle after start, peak ${(rss.peak / 1048576).toFixed(0)} MiB)`,
      '',
      `write methods (database only, 2,000-message batches): unnest ${fmt(methods.unnest!)} msg/s [${methodLoad.unnest}], COPY ${fmt(methods.copy!)} msg/s [${methodLoad.copy}]`,
      `6. physical limit: plain COPY of the same silver rows into a table without key or index ${fmt(copyLimit)} rows/s   [${copyLoad}]`,
      `   Gantry to the limit: end to end ${(e2eRate / copyLimit).toFixed(2)} ×, database only ${(best / copyLimit).toFixed(2)} ×, batch uploads ${(batchRate / copyLimit).toFixed(2)} ×`,
      '',
      `targets: end to end ≥ 0.6 × relay (${(e2eRate / relayRate).toFixed(2)}) and ≥ 30,000 msg/s (${fmt(e2eRate)}); batch ≥ 100,000 readings/s (${fmt(batchRate)}); ingest RSS ≤ 256 MiB (${(Math.max(rssMax, rss.peak) / 1048576).toFixed(0)})`,
      `load average at the end ${os
        .loadavg()
        .map((value) => value.toFixed(1))
        .join(' / ')}`,
    ];
    console.log(lines.join('\n'));
  } finally {
    const watchdog = setTimeout(() => {
      console.error(`cleanup did not finish within ${CLEANUP_MS / 1000} s; exiting (database ${database} may be left)`);
      process.exit(1);
    }, CLEANUP_MS);
    watchdog.unref();
    for (const child of children) await child.stop();
    await broker?.stop();
    await pool?.end();
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
