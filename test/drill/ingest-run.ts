import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '@gantry/config';
import type { Pool } from '@gantry/db';
import { createPublisher, publishMessages, type Publisher } from '@gantry/simulator';
import { provisionFleetBulk, uniqueDeviceIds } from '../support/ingest.ts';
import { spawnService, type ProcessExit, type ServiceProcess } from '../support/processes.ts';
import { compareWithCleanRun, waitForWorkerIdle } from './derived.ts';
import { fleetMessages, planFleet, storeExpectedKeys, type FleetPlan } from './fleet.ts';
import { type Cleanup, type DrillReport, fmt } from './report.ts';

/**
 * The common body of the kill, postgres-restart and broker-restart drills: a fleet
 * published over MQTT into real ingest and worker processes while `faults` does its
 * damage, then the counts (lost, duplicated, unexpected readings; bronze) and the
 * comparison of the derived figures with a clean run.
 */
export interface IngestDrillOptions {
  report: DrillReport;
  cleanup: Cleanup;
  label: string;
  databaseUrl: string;
  pool: Pool;
  brokerUrl: string;
  messages: number;
  devices: number;
  /** Extra GANTRY_* variables for ingest. */
  ingestEnv?: Record<string, string>;
  /** Messages per second (default: as fast as the broker takes them). */
  publishRate?: number;
}

type ServiceName = 'ingest' | 'worker';

export interface RunningSystem {
  plan: FleetPlan;
  publisher: Publisher;
  ingest(): ServiceProcess;
  worker(): ServiceProcess;
  /** SIGKILL, as the drill's own fault (not counted as a crash). */
  kill(name: ServiceName): Promise<ProcessExit>;
  /** Starts the service again (ingest with the same client id: its persistent session). */
  restart(name: ServiceName): Promise<ServiceProcess>;
  /** Silver rows now (null while the database does not answer). */
  silver(): Promise<number | null>;
  /** Polls silver until it reaches `count`; returns the count seen. */
  waitForSilver(count: number, timeoutMs?: number): Promise<number>;
  /** Polls until the predicate holds (a hang guard, not a timing assertion). */
  until(what: string, predicate: () => Promise<boolean> | boolean, timeoutMs?: number): Promise<void>;
}

/** The sum of every series of a Prometheus metric in a /metrics text (0 when absent). */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The /metrics text of a service process ('' when it does not answer). */
export async function scrape(service: ServiceProcess): Promise<string> {
  return fetch(`${service.url}/metrics`).then(
    (response) => response.text(),
    () => '',
  );
}

async function count(pool: Pool, sql: string): Promise<number | null> {
  try {
    const { rows } = await pool.query<{ count: string | null }>(sql);
    return Number(rows[0]?.count ?? 0);
  } catch {
    return null;
  }
}

/**
 * What the database holds against the plan in drill_expected: readings lost, duplicated
 * (rows − distinct keys), unexpected, and bronze by status.
 */
export async function storedCounts(pool: Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<Record<string, string>>(
    `SELECT (SELECT count(*) FROM drill_expected) AS expected,
            (SELECT count(*) FROM telemetry_readings) AS rows,
            (SELECT count(*) FROM (SELECT DISTINCT device_id, type, ts FROM telemetry_readings) k) AS distinct_keys,
            (SELECT count(*) FROM drill_expected e WHERE NOT EXISTS (
               SELECT 1 FROM telemetry_readings r WHERE r.device_id = e.device_id AND r.type = e.type AND r.ts = e.ts)) AS lost,
            (SELECT count(*) FROM telemetry_readings r WHERE NOT EXISTS (
               SELECT 1 FROM drill_expected e WHERE e.device_id = r.device_id AND e.type = r.type AND e.ts = r.ts)) AS unexpected,
            (SELECT coalesce(sum(reading_count), 0) FROM device_messages) AS bronze_readings,
            (SELECT count(*) FROM device_messages) AS bronze_rows,
            (SELECT count(*) FROM device_messages WHERE status = 'accepted') AS accepted,
            (SELECT count(*) FROM device_messages WHERE status = 'duplicate') AS duplicate,
            (SELECT count(*) FROM device_messages WHERE status IN ('rejected', 'partial')) AS rejected`,
  );
  return Object.fromEntries(Object.entries(rows[0]!).map(([key, value]) => [key, Number(value)]));
}

export async function runIngestDrill(
  options: IngestDrillOptions,
  faults: (system: RunningSystem) => Promise<void>,
): Promise<void> {
  const { report, cleanup, pool } = options;
  const deviceIds = uniqueDeviceIds(options.devices, `drill-${options.label}`);
  const plan = planFleet({ deviceIds, total: options.messages });
  const fleet = await provisionFleetBulk(pool, deviceIds, `Drill terminal (${options.label})`);
  await storeExpectedKeys(
    pool,
    plan,
    deviceIds.map((deviceId) => fleet.byDeviceId.get(deviceId)!.id),
  );
  report.step(
    `${fmt(options.devices)} devices provisioned, ${fmt(plan.total)} readings planned (device time ${new Date(plan.start).toISOString().slice(0, 16)} – ${new Date(plan.end).toISOString().slice(0, 16)})`,
    plan.byType,
  );

  const run = randomBytes(3).toString('hex');
  const env: Record<ServiceName, Record<string, string>> = {
    ingest: {
      GANTRY_DATABASE_URL: options.databaseUrl,
      GANTRY_MQTT_URL: options.brokerUrl,
      GANTRY_INGEST_CLIENT_ID: `gantry-ingest-drill-${options.label}-${run}`,
      GANTRY_INGEST_SHARED_GROUP: `drill-${options.label}-${run}`,
      ...options.ingestEnv,
    },
    worker: { GANTRY_DATABASE_URL: options.databaseUrl },
  };

  // Supervision: a process that exits without the drill having stopped it is a crash —
  // counted (a FAIL) and restarted, as `restart: unless-stopped` does in
  // docker-compose.yml, so the counts still say what a crash costs.
  const services = {} as Record<ServiceName, ServiceProcess>;
  const intended = new WeakSet<ServiceProcess>();
  const crashes: string[] = [];
  let finished = false;
  const start = async (name: ServiceName, retryForMs = 0): Promise<ServiceProcess> => {
    const deadline = Date.now() + retryForMs;
    for (;;) {
      if (finished) throw new Error(`not starting ${name}: the drill is over`);
      try {
        const service = await spawnService(name, { env: env[name] });
        services[name] = service;
        void service.exited
          .then((exit) => onExit(service, exit))
          .catch((error: unknown) =>
            report.step(
              `supervisor: ${name} could not be started again: ${error instanceof Error ? error.message.slice(0, 200) : String(error)}`,
            ),
          );
        return service;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await sleep(2000);
      }
    }
  };
  const onExit = async (service: ServiceProcess, exit: ProcessExit) => {
    if (intended.has(service) || finished) return;
    const reason =
      service
        .stderr()
        .split('\n')
        .find((line) => /error|Error/.test(line))
        ?.trim()
        .slice(0, 200) ?? 'no stderr';
    crashes.push(`${service.name} (pid ${service.pid}) exited ${exit.code ?? exit.signal}: ${reason}`);
    report.step(`${service.name} (pid ${service.pid}) EXITED BY ITSELF (${exit.code ?? exit.signal}): ${reason}`);
    const again = await start(service.name as ServiceName, 10 * 60_000);
    report.step(`${service.name} restarted by the drill's supervisor (pid ${again.pid})`);
  };
  const stopSupervising = () => {
    finished = true;
  };
  await start('ingest');
  cleanup.add('ingest', () => {
    stopSupervising();
    return services.ingest.kill();
  });
  await start('worker');
  cleanup.add('worker', () => {
    stopSupervising();
    return services.worker.kill();
  });
  report.step(`ingest (pid ${services.ingest.pid}) and worker (pid ${services.worker.pid}) started as processes`, {
    'ingest client id': env.ingest.GANTRY_INGEST_CLIENT_ID!,
  });

  // Peaks over the run, sampled every second: how much ingest holds un-acknowledged (its
  // window is GANTRY_INGEST_MAX_IN_FLIGHT, also its MQTT 5 Receive Maximum) and its memory.
  const window = loadConfig({ ...env.ingest, GANTRY_DATABASE_URL: 'postgresql://unused' }).ingest.maxInFlight;
  const peaks = { unacknowledged: 0, ingestRss: 0, workerRss: 0 };
  const sampler = setInterval(() => {
    peaks.ingestRss = Math.max(peaks.ingestRss, services.ingest.rss());
    peaks.workerRss = Math.max(peaks.workerRss, services.worker.rss());
    void scrape(services.ingest).then((text) => {
      peaks.unacknowledged = Math.max(peaks.unacknowledged, metricSum(text, 'gantry_ingest_unacknowledged_messages'));
    });
  }, 1000);
  cleanup.add('sampler', async () => clearInterval(sampler));

  const publisher = await createPublisher({
    mqttUrl: options.brokerUrl,
    connections: 2,
    window: 2000,
    clientIdPrefix: `drill-pub-${options.label}-${run}`,
  });
  cleanup.add('publisher', () => publisher.close());
  const publishing = publishMessages(publisher, fleetMessages(plan), { rate: options.publishRate }).then(
    (published) => {
      report.step('publisher done: every message acknowledged by the broker', {
        published,
        'publisher sent': publisher.stats.sent,
      });
      return published;
    },
  );
  publishing.catch(() => undefined);
  report.step(
    `publishing (QoS 1, 2 connections, window 2,000 each${options.publishRate ? `, ${fmt(options.publishRate)} msg/s` : ''})`,
  );

  const silver = () => count(pool, 'SELECT count(*) AS count FROM telemetry_readings');
  const until: RunningSystem['until'] = async (what, predicate, timeoutMs = 20 * 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await predicate())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(200);
    }
  };
  const system: RunningSystem = {
    plan,
    publisher,
    ingest: () => services.ingest,
    worker: () => services.worker,
    kill(name) {
      intended.add(services[name]);
      return services[name].kill();
    },
    restart: (name) => start(name),
    silver,
    async waitForSilver(target, timeoutMs) {
      let seen = 0;
      await until(
        `${fmt(target)} readings in silver`,
        async () => {
          seen = (await silver()) ?? seen;
          return seen >= target;
        },
        timeoutMs,
      );
      return seen;
    },
    until,
  };

  await faults(system);
  const published = await publishing;
  await publisher.close();

  // Every reading in, or no progress for two minutes (then the counts say what is missing).
  let stored = (await silver()) ?? 0;
  let lastChange = Date.now();
  while (stored < plan.total && Date.now() - lastChange < 120_000) {
    await sleep(1000);
    const now = (await silver()) ?? stored;
    if (now !== stored) lastChange = Date.now();
    stored = now;
  }
  report.step(
    stored >= plan.total ? 'every planned reading is in silver' : 'silver stopped growing short of the plan',
    { silver: stored },
  );

  await waitForWorkerIdle(pool, report);
  const ingestMetrics = await scrape(services.ingest);
  const workerMetrics = await scrape(services.worker);
  report.step('worker caught up: derivation queue empty, gold invalidations applied, no recheck due');

  finished = true;
  clearInterval(sampler);
  const ingestExit = await services.ingest.stop();
  const workerExit = await services.worker.stop();
  report.step('ingest and worker stopped with SIGTERM', {
    'ingest exit': String(ingestExit.code ?? ingestExit.signal),
    'worker exit': String(workerExit.code ?? workerExit.signal),
  });

  const c = await storedCounts(pool);
  const duplicated = c.rows! - c.distinct_keys!;
  report.count('readings published (distinct keys)', c.expected!);
  report.count('messages acknowledged by the broker', published);
  report.count('silver rows', c.rows!);
  report.count('silver distinct (device, type, ts)', c.distinct_keys!);
  report.count('lost (published, not in silver)', c.lost!);
  report.count('duplicated (rows − distinct keys)', duplicated);
  report.count('unexpected (in silver, never published)', c.unexpected!);
  report.count('bronze rows (every copy received)', c.bronze_rows!);
  report.count(
    'bronze accepted / duplicate / rejected',
    `${fmt(c.accepted!)} / ${fmt(c.duplicate!)} / ${fmt(c.rejected!)}`,
  );
  report.count('bronze sum(reading_count)', c.bronze_readings!);
  report.count(
    'ingest: redelivered messages (last process)',
    metricSum(ingestMetrics, 'gantry_ingest_messages_redelivered_total'),
  );
  report.count('ingest: commit retries (last process)', metricSum(ingestMetrics, 'gantry_ingest_commit_retries_total'));
  report.count(
    'worker: derivation device runs (last process)',
    metricSum(workerMetrics, 'gantry_derivation_device_runs_total'),
  );
  report.count(`ingest: peak un-acknowledged messages (window ${fmt(window)})`, peaks.unacknowledged);
  report.count('ingest / worker: peak RSS MB', `${fmt(peaks.ingestRss / 1048576)} / ${fmt(peaks.workerRss / 1048576)}`);

  report.check(
    'no process crashed (only the drill’s own kills)',
    crashes.length === 0,
    crashes.length === 0 ? 'none' : crashes.join('; '),
  );
  report.check('no reading lost', c.lost === 0, `lost ${fmt(c.lost!)} of ${fmt(c.expected!)}`);
  report.check('no reading duplicated', duplicated === 0, `duplicated ${fmt(duplicated)}`);
  report.check('nothing unexpected in silver', c.unexpected === 0, `unexpected ${fmt(c.unexpected!)}`);
  report.check(
    'every published message reached the broker',
    published === plan.total,
    `${fmt(published)} of ${fmt(plan.total)}`,
  );
  // Bronze against silver (what was stored, whatever was lost): each stored reading counted once.
  report.check(
    'bronze counts each stored reading once',
    c.bronze_readings === c.rows && c.rejected === 0,
    `sum(reading_count) ${fmt(c.bronze_readings!)}, rejected ${fmt(c.rejected!)}, redelivered copies ${fmt(c.duplicate!)}`,
  );

  await compareWithCleanRun(pool, options.databaseUrl, report);
}
