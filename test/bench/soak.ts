/**
 * `pnpm bench:soak` — issue 10: SOAK_MINUTES (30) at half the measured maximum ingest
 * rate with the API under concurrent load; memory flat, lag bounded, no errors.
 *
 * In one run, against a private Mosquitto (deploy/mosquitto config) and a fresh migrated
 * database gantry_soak_<x>_test on the test server (dropped at the end, also on failure
 * or Ctrl-C):
 *   1. provisions one tenant: SOAK_DEVICES devices with an asset each (a fifth for
 *      "Customer A"), operators, an allowed yard and a forbidden zone inside it, a tenant
 *      key and a customer key;
 *   2. starts api, ingest and worker as real processes (test/support/processes.ts);
 *   3. calibrates (soak/calibrate.ts): publishes as fast as ingest commits for
 *      SOAK_CALIBRATION_SECONDS, worker not yet started, and counts committed rows in the
 *      database; then empties bronze/silver/state/queue and starts the worker.
 *      SOAK_RATE skips this;
 *   4. publishes fleetTraffic at half that rate, device time = now (soak/live-traffic.ts),
 *      so derivation, geofences and the gold refresh have live work, while autocannon
 *      goes round 14 real endpoints with both keys (soak/api-load.ts) on
 *      SOAK_API_CONNECTIONS connections at SOAK_API_RATE requests/s (rate limits raised);
 *   5. probes every 5 s (RSS of each process, derivation lag, end-to-end ingest lag) and
 *      prints a row every SOAK_SAMPLE_SECONDS (soak/table.ts);
 *   6. stops publishing, waits for ingest and derivation to drain, checks silver holds
 *      every published reading exactly once, prints the verdict; exits 1 when a check
 *      fails, 130 when interrupted.
 *
 * Env: SOAK_MINUTES (30), SOAK_RATE (skip calibration), SOAK_CALIBRATION_SECONDS (40),
 * SOAK_DEVICES (1000), SOAK_SAMPLE_SECONDS (30; 10–30 for short runs), SOAK_API_CONNECTIONS
 * (4), SOAK_API_RATE (25; 0 = closed loop), SOAK_MAX_INGEST_LAG_SECONDS (10),
 * SOAK_MAX_DERIVATION_LAG_SECONDS (60), SOAK_RSS_TOLERANCE_MIB (16),
 * SOAK_RSS_TOLERANCE_PERCENT (10), SOAK_STORAGE_MODE (auto), SOAK_KEEP_DATABASE=1 (keep
 * the database for a post-mortem), GANTRY_TEST_DATABASE_URL (the server).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { provisioning } from '@gantry/api';
import { createOutbox, createPool, migrateDatabase, type Pool, type RequestedStorageMode } from '@gantry/db';
import { DEMO_YARD, createPublisher, publishMessages } from '@gantry/simulator';
import { startTestBroker } from '../support/broker.ts';
import { serverUrl, withDatabase } from '../support/database-url.ts';
import { provisionFleetBulk } from '../support/ingest.ts';
import { spawnService, type ServiceName, type ServiceProcess } from '../support/processes.ts';
import { startResourceMeter } from './soak/resources.ts';
import { abortable, childController } from './soak/abort.ts';
import { startApiLoad, type Endpoint } from './soak/api-load.ts';
import { calibrate, type Calibration } from './soak/calibrate.ts';
import { liveFleetTraffic } from './soak/live-traffic.ts';
import { bronzeStatuses, countRows, derivedCounts, goldState, probeBacklogs, tableChurn } from './soak/probes.ts';
import { buckets, quantileBound, scrape, sum } from './soak/prometheus.ts';
import { watchLogs, type LogWatch } from './soak/service-logs.ts';
import { formatRow, tableHeader, type Row } from './soak/table.ts';
import { judgeFlatness, type Check, type RssPoint } from './soak/verdict.ts';
import { describeSessionTables, sessionTableStats } from './session-tables.ts';
import { cpuTimes } from './machine-cpu.ts';

function setting(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return value;
}

const SOAK_SECONDS = Math.max(30, Math.round(setting('SOAK_MINUTES', 30) * 60));
const FIXED_RATE = setting('SOAK_RATE', 0);
const CALIBRATION_SECONDS = setting('SOAK_CALIBRATION_SECONDS', 40);
const CALIBRATION_BACKLOG = 50_000;
const DEVICES = Math.max(1, Math.round(setting('SOAK_DEVICES', 1000)));
const SAMPLE_SECONDS = Math.max(
  5,
  setting('SOAK_SAMPLE_SECONDS', Math.min(30, Math.max(10, Math.round(SOAK_SECONDS / 12 / 5) * 5))),
);
const PROBE_SECONDS = 5;
const API_CONNECTIONS = Math.max(1, Math.round(setting('SOAK_API_CONNECTIONS', 4)));
const API_RATE = setting('SOAK_API_RATE', 25);
const MAX_INGEST_LAG = setting('SOAK_MAX_INGEST_LAG_SECONDS', 10);
const MAX_DERIVATION_LAG = setting('SOAK_MAX_DERIVATION_LAG_SECONDS', 60);
const RSS_TOLERANCE_MIB = setting('SOAK_RSS_TOLERANCE_MIB', 16);
const RSS_TOLERANCE_PERCENT = setting('SOAK_RSS_TOLERANCE_PERCENT', 10);
const STORAGE_MODE = (process.env.SOAK_STORAGE_MODE ?? 'auto') as RequestedStorageMode;
const KEEP_DATABASE = process.env.SOAK_KEEP_DATABASE === '1';
const DRAIN_SECONDS = 180;

const MiB = 1024 * 1024;
const services: ServiceName[] = ['api', 'ingest', 'worker'];
const now = () => performance.now();
const fmt = (value: number, digits = 0) =>
  Number.isFinite(value)
    ? value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : value === Infinity
      ? '∞'
      : '—';
const log = (message: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
const out = (line = '') => process.stdout.write(`${line}\n`);

/** Box CPU busy since the previous call, in % of all cores (the machine may be shared). */
function busyMeter(): () => number {
  let previous = cpuTimes();
  return () => {
    const current = cpuTimes();
    const busy = 100 * (1 - (current.idle - previous.idle) / Math.max(1, current.total - previous.total));
    previous = current;
    return busy;
  };
}

/** A rectangle around a point as a GeoJSON polygon (the demo tenant's shapes). */
function rectangle(lat: number, lon: number, halfLat: number, halfLon: number): number[][][] {
  return [
    [
      [lon - halfLon, lat - halfLat],
      [lon + halfLon, lat - halfLat],
      [lon + halfLon, lat + halfLat],
      [lon - halfLon, lat + halfLat],
      [lon - halfLon, lat - halfLat],
    ],
  ];
}

interface Fleet {
  deviceIds: string[];
  assetId: string;
  tenantKey: string;
  customerKey: string;
}

async function provisionSoakFleet(pool: Pool): Promise<Fleet> {
  const run = randomBytes(2).toString('hex');
  const deviceIds = Array.from({ length: DEVICES }, (_, index) => `soak-${run}-${String(index + 1).padStart(5, '0')}`);
  const fleet = await provisionFleetBulk(pool, deviceIds, 'Soak terminal');
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  await pool.query(
    `UPDATE assets SET customer_name = 'Customer A'
      WHERE id IN (SELECT asset_id FROM devices WHERE tenant_id = $1 AND right(device_id, 1) IN ('0', '5'))`,
    [fleet.tenantId],
  );
  for (let index = 1; index <= 5; index += 1) {
    await provisioning.createOperator(deps, fleet.tenantId, {
      identifier: `OP-${String(index).padStart(3, '0')}`,
      operatorName: `Operator ${index}`,
    });
  }
  // fleetTraffic wanders around the demo yard: most fixes fall inside the allowed zone,
  // some cross the forbidden one, so geofence transitions and alerts have live work.
  await provisioning.createGeofence(deps, fleet.tenantId, {
    name: 'Terminal yard',
    type: 'allowed',
    geometry: { type: 'Polygon', coordinates: rectangle(DEMO_YARD.lat, DEMO_YARD.lon, 0.006, 0.01) as never },
  });
  await provisioning.createGeofence(deps, fleet.tenantId, {
    name: 'Quay crane exclusion zone',
    type: 'forbidden',
    geometry: {
      type: 'Polygon',
      coordinates: rectangle(DEMO_YARD.lat + 0.002, DEMO_YARD.lon + 0.002, 0.0008, 0.0012) as never,
    },
  });
  const tenantKey = (await provisioning.createApiKey(deps, fleet.tenantId, { name: 'soak tenant key' })).key;
  const customerKey = (
    await provisioning.createApiKey(deps, fleet.tenantId, { name: 'soak customer key', customerName: 'Customer A' })
  ).key;
  await pool.query('ANALYZE');
  return { deviceIds, assetId: fleet.devices[0]!.assetId, tenantKey, customerKey };
}

/** The rotation: what integrators poll, over the default ranges (which end now, where the live data is). */
function endpoints(fleet: Fleet): Endpoint[] {
  const t = fleet.tenantKey;
  const c = fleet.customerKey;
  return [
    { name: '/me', path: '/me', key: t },
    { name: 'devices', path: '/telemetry/devices?limit=100', key: t },
    { name: 'utilization hour/asset', path: '/telemetry/utilization?bucket=hour&groupBy=asset', key: t },
    { name: 'usage sessions', path: '/telemetry/usage-sessions', key: t },
    { name: 'data quality', path: '/telemetry/data-quality', key: t },
    { name: 'reporting overview', path: '/reporting/overview', key: t },
    { name: 'asset state', path: `/telemetry/assets/${fleet.assetId}/state`, key: t },
    { name: 'positions (one asset)', path: `/telemetry/assets/${fleet.assetId}/positions`, key: t },
    { name: 'utilization hour/fleet', path: '/telemetry/utilization?bucket=hour&groupBy=fleet', key: t },
    { name: 'geofence alerts', path: '/telemetry/geofence-alerts', key: t },
    { name: 'identifier sessions', path: '/telemetry/identifier-sessions', key: t },
    { name: 'devices (customer key)', path: '/telemetry/devices?limit=100', key: c },
    { name: 'usage sessions (customer key)', path: '/telemetry/usage-sessions', key: c },
    { name: 'container work (customer key)', path: '/telemetry/container-work?bucket=hour', key: c },
  ];
}

async function stopService(service: ServiceProcess): Promise<void> {
  const killed = sleep(20_000).then(() => service.kill());
  await Promise.race([service.stop(), killed]);
}

/** CPU time of this process since `since`, in % of one core over the wall time since `startedAt`. */
function scriptCpuPercent(since: NodeJS.CpuUsage, startedAt: number): number {
  const used = process.cpuUsage(since);
  return ((used.user + used.system) / 1000 / (now() - startedAt)) * 100;
}

let signals = 0;

async function main(): Promise<void> {
  const interrupt = new AbortController();
  let firstSignalAt = 0;
  const onSignal = (name: NodeJS.Signals) => {
    signals += 1;
    // Ctrl-C reaches this process twice (the terminal signals the whole group, and the
    // tsx wrapper relays it again): only a signal seconds after the first means "now".
    if (signals > 1) {
      if (now() - firstSignalAt < 3000) return;
      log(`${name} again: exiting without clean-up`);
      process.exit(130);
    }
    firstSignalAt = now();
    log(`${name}: stopping and cleaning up (again, 3 s from now, to exit at once)…`);
    interrupt.abort(new Error(`interrupted by ${name}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const signal = interrupt.signal;

  // Clean-up steps, run in reverse order whatever happens.
  const cleanup: Array<[string, () => Promise<unknown>]> = [];
  const loadAtStart = os.loadavg();
  const cpuAtStart = process.cpuUsage();
  const startedAt = now();
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  cleanup.push(['admin connection', () => admin.end()]);
  const database = `gantry_soak_${randomBytes(3).toString('hex')}_test`;
  let failed = false;
  try {
    await admin.query(`CREATE DATABASE ${database}`);
    cleanup.push([
      `database ${database}`,
      async () =>
        KEEP_DATABASE
          ? log(`kept ${database} (SOAK_KEEP_DATABASE=1)`)
          : admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`),
    ]);
    const databaseUrl = withDatabase(serverUrl(), database);
    log(`migrating ${database}…`);
    const { storageMode } = await migrateDatabase(databaseUrl, {
      storageMode: STORAGE_MODE,
      retention: { bronzeDays: 14, readingDays: 400 },
    });
    const pool = createPool(databaseUrl, { max: 4, applicationName: 'gantry-soak' });
    cleanup.push(['pool', () => pool.end()]);
    const fleet = await provisionSoakFleet(pool);
    const broker = await startTestBroker();
    cleanup.push(['broker', () => broker.stop()]);
    signal.throwIfAborted();

    // 2. The services as real processes.
    const run = randomBytes(3).toString('hex');
    // GANTRY_* variables the soak runs with reach every service (tuning: batch sizes, pools …).
    const passed = Object.fromEntries(
      Object.entries(process.env).filter(
        (entry): entry is [string, string] => entry[0].startsWith('GANTRY_') && entry[1] !== undefined,
      ),
    );
    const common = { ...passed, GANTRY_DATABASE_URL: databaseUrl, GANTRY_MQTT_URL: broker.url };
    const serviceEnv: Record<ServiceName, Record<string, string>> = {
      // Load, not the limiter, is under test: budgets the rotation never reaches, so a 429 is a real error.
      api: {
        ...common,
        GANTRY_RATE_LIMIT_PER_SECOND: '1000000',
        GANTRY_RATE_LIMIT_BURST: '1000000',
        GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE: '100000',
      },
      ingest: {
        ...common,
        GANTRY_INGEST_CLIENT_ID: `gantry-soak-ingest-${run}`,
        GANTRY_INGEST_SHARED_GROUP: `soak-${run}`,
      },
      worker: { ...common },
    };
    const logs = {} as Record<ServiceName, LogWatch>;
    const start = async (name: ServiceName) => {
      const service = await spawnService(name, { env: serviceEnv[name] });
      logs[name] = watchLogs(service);
      cleanup.push([name, () => stopService(service)]);
      return service;
    };
    log('starting api and ingest…');
    const api = await start('api');
    const ingest = await start('ingest');
    const idleRss = { api: api.rss(), ingest: ingest.rss() };
    const publisher = await createPublisher({ mqttUrl: broker.url, connections: 2, window: 2000 });
    cleanup.push(['publisher', () => publisher.close()]);

    // 3. Calibration.
    let calibration: Calibration | null = null;
    let rate = FIXED_RATE;
    if (rate === 0) {
      log(`calibrating: publishing as fast as ingest commits for ${CALIBRATION_SECONDS} s (worker not started yet)…`);
      const busy = busyMeter();
      calibration = await calibrate({
        pool,
        publisher,
        ingestUrl: ingest.url,
        deviceIds: fleet.deviceIds,
        seconds: CALIBRATION_SECONDS,
        maxBacklog: CALIBRATION_BACKLOG,
        signal,
      });
      const calibrationBusy = busy();
      rate = Math.max(1, Math.round(calibration.rate / 2));
      log(
        `maximum ingest rate ${fmt(calibration.rate)} msg/s (box ${fmt(calibrationBusy)}% busy) → soak at ${fmt(rate)} msg/s`,
      );
      await pool.query(
        'TRUNCATE telemetry_readings, device_message_batches, device_message_rows, device_state, derivation_queue',
      );
      await pool.query(
        'ANALYZE telemetry_readings, device_message_batches, device_message_rows, device_state, derivation_queue',
      );
    }
    signal.throwIfAborted();
    log('starting worker…');
    const worker = await start('worker');
    const processes: Record<ServiceName, ServiceProcess> = { api, ingest, worker };
    const intervalMs = (DEVICES * 1000) / rate;
    log(
      `soak: ${fmt(rate)} msg/s for ${fmt(SOAK_SECONDS / 60, 1)} min from ${fmt(DEVICES)} devices (a message per device every ${fmt(intervalMs)} ms); ` +
        `API ${API_CONNECTIONS} connections, ${API_RATE ? `${fmt(API_RATE)} req/s` : 'closed loop'}; a row every ${SAMPLE_SECONDS} s`,
    );

    // 4. Traffic and API load.
    const ingestAtStart = await scrape(ingest.url);
    const storedBefore = sum(ingestAtStart, 'gantry_ingest_messages_stored_total');
    const redeliveredBefore = sum(ingestAtStart, 'gantry_ingest_messages_redelivered_total');
    const readingsBefore = sum(ingestAtStart, 'gantry_ingest_readings_stored_total');
    const receiveLagBefore = buckets(ingestAtStart, 'gantry_ingest_lag_seconds');
    const commitBefore = buckets(ingestAtStart, 'gantry_ingest_commit_seconds');
    const publishing = childController(signal);
    const soakStarted = now();
    const sentBefore = publisher.stats.sent;
    const publishDone = publishMessages(
      publisher,
      liveFleetTraffic({ deviceIds: fleet.deviceIds, rate, seconds: SOAK_SECONDS }),
      {
        rate,
        signal: publishing.signal,
      },
    );
    const load = startApiLoad({
      url: api.url,
      endpoints: endpoints(fleet),
      connections: API_CONNECTIONS,
      ...(API_RATE ? { rate: API_RATE } : {}),
      durationSeconds: SOAK_SECONDS + 3600,
    });
    cleanup.push(['API load', () => load.stop()]);
    const resources = startResourceMeter({
      pool,
      database,
      processes: { ingest: ingest.pid, worker: worker.pid, api: api.pid },
    });

    // 5. Probes and rows.
    const rss: Record<ServiceName, RssPoint[]> = { api: [], ingest: [], worker: [] };
    const probes: Array<{ t: number; derivationLag: number; freshness: number; ingestLockWaits: number }> = [];
    const rows: Row[] = [];
    const exits: string[] = [];
    const cpu = busyMeter();
    const soakEnd = soakStarted + SOAK_SECONDS * 1000;
    let window = { start: soakStarted, derivationMax: 0, freshnessMax: 0 };
    let last = {
      stored: storedBefore,
      redelivered: redeliveredBefore,
      sent: sentBefore,
      receiveLag: receiveLagBefore,
      commit: commitBefore,
    };
    let nextProbe = soakStarted + PROBE_SECONDS * 1000;
    let nextRow = soakStarted + SAMPLE_SECONDS * 1000;
    out('');
    out(
      calibration
        ? `maximum ingest rate ${fmt(calibration.rate)} msg/s (calibrated)   →   soak rate ${fmt(rate)} msg/s for ${fmt(SOAK_SECONDS / 60, 1)} min`
        : `soak rate ${fmt(rate)} msg/s (SOAK_RATE) for ${fmt(SOAK_SECONDS / 60, 1)} min`,
    );
    out(tableHeader);
    for (;;) {
      await sleep(Math.max(0, Math.min(nextProbe, soakEnd) - now()), undefined, { signal });
      const t = (now() - soakStarted) / 1000;
      for (const name of services) rss[name].push({ t, bytes: processes[name].rss() });
      const backlogs = await probeBacklogs(pool);
      probes.push({
        t,
        derivationLag: backlogs.derivationLag,
        freshness: backlogs.freshness,
        ingestLockWaits: backlogs.ingestLockWaits,
      });
      window.derivationMax = Math.max(window.derivationMax, backlogs.derivationLag);
      window.freshnessMax = Math.max(window.freshnessMax, backlogs.freshness);
      for (const name of services) {
        const { child } = processes[name];
        if ((child.exitCode !== null || child.signalCode !== null) && !exits.some((exit) => exit.startsWith(name))) {
          exits.push(`${name} exited (code ${child.exitCode}, signal ${child.signalCode}) ${fmt(t)} s into the soak`);
        }
      }
      nextProbe += PROBE_SECONDS * 1000;
      const ended = now() >= soakEnd;
      if (now() < nextRow && !ended && exits.length === 0) continue;

      const seconds = (now() - window.start) / 1000;
      const metrics = await scrape(ingest.url);
      const stored = sum(metrics, 'gantry_ingest_messages_stored_total');
      const redelivered = sum(metrics, 'gantry_ingest_messages_redelivered_total');
      const receiveLag = buckets(metrics, 'gantry_ingest_lag_seconds');
      const commit = buckets(metrics, 'gantry_ingest_commit_seconds');
      const sent = publisher.stats.sent;
      const gold = await goldState(pool);
      const requests = load.takeWindow();
      const row: Row = {
        t,
        pubRate: (sent - last.sent) / seconds,
        commitRate: (stored - last.stored) / seconds,
        backlog: sent - sentBefore - (stored - storedBefore),
        redelivered: redelivered - last.redelivered,
        freshnessMax: window.freshnessMax,
        receiveLagP95: quantileBound(last.receiveLag, receiveLag, 0.95),
        commitP95: quantileBound(last.commit, commit, 0.95),
        derivationLagMax: window.derivationMax,
        queued: backlogs.queued,
        goldBacklog: gold.backlog,
        apiRate: requests.requests / seconds,
        apiP95: requests.p95,
        apiNon2xx: requests.non2xx,
        apiFailures: requests.failures,
        api5xx: requests.status5xx,
        errorLines: services.reduce((total, name) => total + logs[name].errors, 0),
        rssMiB: [api.rss() / MiB, ingest.rss() / MiB, worker.rss() / MiB],
        busy: cpu(),
        load: os.loadavg()[0]!,
      };
      rows.push(row);
      out(formatRow(row));
      last = { stored, redelivered, sent, receiveLag, commit };
      window = { start: now(), derivationMax: 0, freshnessMax: 0 };
      nextRow += SAMPLE_SECONDS * 1000;
      if (exits.length > 0) log(`stopping early: ${exits.join('; ')}`);
      if (ended || exits.length > 0) break;
    }

    // 6. Stop publishing, drain, verify.
    const used = await resources.stop();
    publishing.abort();
    const published = await abortable(publishDone, signal);
    const publishSeconds = (now() - soakStarted) / 1000;
    const apiTotals = load.endpointTotals();
    await load.stop();
    log(`published ${fmt(published)} messages; waiting for ingest and derivation to drain…`);
    const drainStarted = now();
    let ingestDrained: number | null = null;
    let derivationDrained: number | null = null;
    // Waits on ingest's own count of new silver readings (a count(*) over millions of rows
    // every half second would load the database it measures); the database is counted once after.
    for (
      const deadline = drainStarted + DRAIN_SECONDS * 1000;
      now() < deadline;
      await sleep(500, undefined, { signal })
    ) {
      if (ingestDrained === null) {
        const readings = sum(await scrape(ingest.url), 'gantry_ingest_readings_stored_total') - readingsBefore;
        if (readings >= published) ingestDrained = now();
      }
      if (ingestDrained !== null && (await probeBacklogs(pool)).derivationLag === 0) {
        derivationDrained = now();
        break;
      }
    }
    const counts = await countRows(pool);
    const statuses = await bronzeStatuses(pool);
    const accepted = statuses.filter((row) => row.status === 'accepted').reduce((total, row) => total + row.n, 0);
    const duplicates = statuses.filter((row) => row.status === 'duplicate').reduce((total, row) => total + row.n, 0);
    const refused = statuses
      .filter((row) => row.status !== 'accepted' && row.status !== 'duplicate')
      .reduce((total, row) => total + row.n, 0);
    const gold = await goldState(pool);
    const derived = await derivedCounts(pool);
    const churn = await tableChurn(pool);
    const autovacuum = (await pool.query<{ autovacuum: string }>('SHOW autovacuum')).rows[0]?.autovacuum;
    const sessionTables = await sessionTableStats(pool);
    const ingestMetrics = await scrape(ingest.url);
    const workerMetrics = await scrape(worker.url);
    const redelivered = sum(ingestMetrics, 'gantry_ingest_messages_redelivered_total') - redeliveredBefore;
    const receiveLagAll = buckets(ingestMetrics, 'gantry_ingest_lag_seconds');
    const commitAll = buckets(ingestMetrics, 'gantry_ingest_commit_seconds');
    const lockWaitShare =
      probes.length === 0 ? 0 : (100 * probes.filter((probe) => probe.ingestLockWaits > 0).length) / probes.length;

    // Verdict.
    const judged = Math.min(SOAK_SECONDS, rows[rows.length - 1]?.t ?? 0);
    const checks: Check[] = [];
    for (const name of services) {
      const f = judgeFlatness(rss[name], judged, RSS_TOLERANCE_MIB, RSS_TOLERANCE_PERCENT);
      checks.push({
        name: `memory flat: ${name}`,
        ok: f.flat,
        detail:
          `mean RSS ${fmt(f.middleMiB, 1)} MiB in the middle third → ${fmt(f.lastMiB, 1)} MiB in the last (${f.growthMiB >= 0 ? '+' : ''}${fmt(f.growthMiB, 1)} MiB, ` +
          `allowed +${fmt(f.toleranceMiB, 1)}); slope after warm-up ${fmt(f.slopeMiBPerMinute, 2)} MiB/min`,
      });
    }
    const thirds = (values: Array<{ t: number; v: number }>) => ({
      middle: Math.max(0, ...values.filter((p) => p.t >= judged / 3 && p.t < (2 * judged) / 3).map((p) => p.v)),
      last: Math.max(0, ...values.filter((p) => p.t >= (2 * judged) / 3).map((p) => p.v)),
    });
    const maxFreshness = Math.max(0, ...probes.map((probe) => probe.freshness));
    const freshnessThirds = thirds(probes.map((probe) => ({ t: probe.t, v: probe.freshness })));
    checks.push({
      name: 'ingest lag bounded',
      ok: maxFreshness <= MAX_INGEST_LAG,
      detail:
        `end-to-end (device time → committed) max ${fmt(maxFreshness, 2)} s, middle third ${fmt(freshnessThirds.middle, 2)} s, last ${fmt(freshnessThirds.last, 2)} s; ` +
        `received − device time p95 ≤ ${fmt(quantileBound(receiveLagBefore, receiveLagAll, 0.95), 2)} s, all ≤ ${fmt(quantileBound(receiveLagBefore, receiveLagAll, 1), 2)} s; limit ${MAX_INGEST_LAG} s`,
    });
    const maxDerivationLag = Math.max(0, ...probes.map((probe) => probe.derivationLag));
    const derivationThirds = thirds(probes.map((probe) => ({ t: probe.t, v: probe.derivationLag })));
    checks.push({
      name: 'derivation lag bounded',
      ok: maxDerivationLag <= MAX_DERIVATION_LAG && derivationDrained !== null,
      detail:
        `oldest underived reading max ${fmt(maxDerivationLag, 1)} s, middle third ${fmt(derivationThirds.middle, 1)} s, last ${fmt(derivationThirds.last, 1)} s; limit ${MAX_DERIVATION_LAG} s; ` +
        (derivationDrained === null
          ? `queue NOT drained ${DRAIN_SECONDS} s after publishing stopped`
          : `queue drained ${fmt((derivationDrained - drainStarted) / 1000, 1)} s after publishing stopped`),
    });
    const achieved = published / publishSeconds;
    checks.push({
      name: 'rate held',
      ok: achieved >= 0.95 * rate,
      detail: `published ${fmt(achieved)} msg/s of the ${fmt(rate)} msg/s target (${fmt((100 * achieved) / rate, 1)} %)`,
    });
    checks.push({
      name: 'nothing lost or doubled',
      ok: ingestDrained !== null && accepted === published && counts.silver === published,
      detail:
        `${fmt(published)} published, ${fmt(accepted)} accepted in bronze (+${fmt(duplicates)} duplicate copies), ${fmt(counts.silver)} silver readings; ` +
        (ingestDrained === null
          ? `ingest NOT drained ${DRAIN_SECONDS} s after publishing stopped`
          : `last reading committed ${fmt((ingestDrained - drainStarted) / 1000, 1)} s after publishing stopped`),
    });
    const total = (pick: (row: Row) => number) => rows.reduce((acc, row) => acc + pick(row), 0);
    const errorCounts: Array<[string, number]> = [
      ['processes exited', exits.length],
      ['API non-2xx', total((row) => row.apiNon2xx)],
      ['API 5xx', total((row) => row.api5xx)],
      ['API requests without an answer', total((row) => row.apiFailures)],
      ...services.map((name): [string, number] => [`"level" ≥ 50 lines (${name})`, logs[name].errors]),
      ['bronze rows rejected or partial', refused],
      ['messages redelivered (an ingest connection dropped)', redelivered],
      ['ingest commit retries', sum(ingestMetrics, 'gantry_ingest_commit_retries_total')],
      ['derivation failures', sum(workerMetrics, 'gantry_derivation_device_failures_total')],
      ['gold refresh failures', sum(workerMetrics, 'gantry_gold_refresh_failures_total') + gold.failed.length],
    ];
    checks.push({
      name: 'no errors',
      ok: errorCounts.every(([, count]) => count === 0),
      detail: errorCounts.map(([label, count]) => `${label} ${fmt(count)}`).join(', '),
    });

    // Report.
    const apiRequests = apiTotals.reduce((acc, endpoint) => acc + endpoint.requests, 0);
    out('');
    out(
      `== pnpm bench:soak — ${storageMode} mode, ${fmt(DEVICES)} devices, ${fmt(judged / 60, 1)} of ${fmt(SOAK_SECONDS / 60, 1)} min ==`,
    );
    out(
      `machine: ${os.cpus().length} cores, load average ${loadAtStart.map((value) => value.toFixed(1)).join(' / ')} at start, ` +
        `${os
          .loadavg()
          .map((value) => value.toFixed(1))
          .join(' / ')} at the end (a shared machine makes every figure indicative)`,
    );
    out(
      calibration
        ? `maximum ingest rate ${fmt(calibration.rate)} msg/s (${fmt(calibration.published)} messages in ${fmt(calibration.seconds, 1)} s, published at ${fmt(calibration.publishRate)} msg/s)   →   soak rate ${fmt(rate)} msg/s (half)`
        : `maximum ingest rate not measured (SOAK_RATE)   →   soak rate ${fmt(rate)} msg/s`,
    );
    out(
      `traffic: a message per device every ${fmt(intervalMs)} ms; derived ${fmt(derived.segments)} segments, ${fmt(derived.usage)} usage and ` +
        `${fmt(derived.identifier)} identifier sessions, ${fmt(derived.alerts)} geofence alerts; gold invalidations left at the end ${fmt(gold.backlog)}`,
    );
    for (const line of describeSessionTables([], sessionTables)) out(`session table ${line}`);
    out(
      `ingest: batch write + commit p50 ≤ ${fmt(quantileBound(commitBefore, commitAll, 0.5), 3)} s, p95 ≤ ${fmt(quantileBound(commitBefore, commitAll, 0.95), 2)} s; ` +
        `a writer was waiting for a row lock (worker claim or the other writer) at ${fmt(lockWaitShare)} % of the ${fmt(probes.length)} probes`,
    );
    out(
      `bronze: ${statuses.map((row) => `${row.status}${row.error ? ` ${row.error}` : ''} ${fmt(row.n)}`).join(', ')}`,
    );
    out(
      `API: ${fmt(apiRequests)} requests (${fmt(apiRequests / publishSeconds, 1)}/s) on ${API_CONNECTIONS} connections — p50 / p95 / max ms per endpoint:`,
    );
    for (const endpoint of apiTotals) {
      const bad = endpoint.non2xx > 0 ? `   non-2xx ${fmt(endpoint.non2xx)} (5xx ${fmt(endpoint.status5xx)})` : '';
      out(
        `  ${endpoint.name.padEnd(30)} ${fmt(endpoint.requests).padStart(7)}  ${fmt(endpoint.p50).padStart(6)} / ${fmt(endpoint.p95).padStart(6)} / ${fmt(endpoint.max).padStart(6)}${bad}`,
      );
    }
    out(
      `RSS MiB: idle after start api ${fmt(idleRss.api / MiB)}, ingest ${fmt(idleRss.ingest / MiB)}; at the end ${services.map((name) => `${name} ${fmt(processes[name].rss() / MiB)}`).join(', ')}; ` +
        `this script ${fmt(process.memoryUsage.rss() / MiB)} (publisher + load generator; it used ${fmt(scriptCpuPercent(cpuAtStart, startedAt))} % of a core)`,
    );
    out(
      `stderr: ${services.map((name) => `${name} ${logs[name].errors} error / ${logs[name].warnings} warn / ${logs[name].other} other lines`).join(', ')}`,
    );
    for (const line of services.flatMap((name) => logs[name].samples)) out(`  ${line}`);
    for (const exit of exits) out(`  ${exit}`);
    out(
      `CPU while publishing (${fmt(used.wallSeconds)} s, ${os.cpus().length} cores): ` +
        used.cpu.map((group) => `${group.name} ${fmt(group.cores, 2)}`).join(', ') +
        ' cores',
    );
    out(
      `row-per-device tables (updates, HOT %, dead rows, pages, vacuums${autovacuum === 'on' ? '' : "; autovacuum is OFF on this server: the worker's table maintenance vacuums and analyzes"}): ${churn
        .map(
          (table) =>
            `${table.table} ${fmt(table.updates)} / ${fmt(table.hotPercent, 1)} % / ${fmt(table.deadRows)} / ${fmt(table.pages)} / ${fmt(table.vacuums)}`,
        )
        .join('; ')}`,
    );
    out(`database time by statement (pg_stat_activity sampled ${fmt(used.samples)} times; share of active time):`);
    for (const statement of used.statements.slice(0, 12))
      out(
        `  ${statement.statement.padEnd(40)} ${fmt(statement.seconds).padStart(6)} s  ${fmt(statement.share, 1).padStart(5)} %   ${statement.waits}`,
      );
    out('');
    for (const check of checks) out(`${check.ok ? 'PASS' : 'FAIL'}  ${check.name.padEnd(24)} ${check.detail}`);
    const failures = checks.filter((check) => !check.ok).length;
    out(failures === 0 ? 'verdict: PASS' : `verdict: FAIL (${failures} of ${checks.length} checks)`);
    failed = failures > 0;
  } finally {
    for (const [label, step] of cleanup.reverse()) {
      // A step that hangs (a socket to a dead broker) must not keep the others from running.
      const timeout = sleep(30_000).then(() => {
        throw new Error('no answer within 30 s');
      });
      await Promise.race([step(), timeout]).catch((error: unknown) =>
        log(`clean-up of ${label} failed: ${error instanceof Error ? error.message : String(error)}`),
      );
    }
  }
  if (failed) process.exitCode = 1;
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    if (signals > 0) {
      log('interrupted; cleaned up');
      process.exit(130);
    }
    console.error(error);
    process.exit(1);
  },
);
