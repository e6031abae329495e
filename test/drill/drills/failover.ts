import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createOutbox, createPool } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { startTestBroker } from '../../support/broker.ts';
import { patroniAvailable, startPatroniCluster, type PatroniCluster } from '../../support/patroni.ts';
import { spawnService, type ServiceProcess } from '../../support/processes.ts';
import { migrateForDrill } from '../database.ts';
import { metricSum, runIngestDrill, scrape, type RunningSystem } from '../ingest-run.ts';
import { type DrillContext, type DrillReport, fmt } from '../report.ts';

/**
 * failover — Gantry on a Patroni cluster (two PostgreSQL nodes, synchronous_mode, one
 * etcd member, HAProxy routing by /primary: test/support/patroni.ts), ingest at
 * DRILL_FAILOVER_RATE msg/s QoS 1 and the API under a dashboard's load, through two
 * faults in one run: the primary node lost (SIGKILL of its Patroni and of its
 * postmaster) once 25 % of the readings are stored, the node started again (it
 * rejoins as a replica), then a clean `patronictl switchover` at 60 %. The usual
 * counts follow (lost, doubled, counters, derived relations against a clean run).
 */
const DASHBOARD_PATHS = [
  '/reporting/overview',
  '/telemetry/devices?limit=50',
  '/telemetry/usage-sessions?limit=50',
  '/telemetry/data-quality',
];

interface Answer {
  startedAt: number;
  status: number | 'timeout' | 'network';
  ms: number;
  retryAfter: boolean;
  jsonError: boolean;
}

/** Four clients asking the dashboard's endpoints in turn, each answer recorded. */
function startDashboard(apiUrl: string, key: string) {
  const answers: Answer[] = [];
  let running = true;
  const client = async (offset: number) => {
    for (let index = offset; running; index += 1) {
      const path = DASHBOARD_PATHS[index % DASHBOARD_PATHS.length]!;
      const startedAt = Date.now();
      try {
        const response = await fetch(`${apiUrl}/api/external/v1${path}`, {
          headers: { 'X-API-Key': key },
          signal: AbortSignal.timeout(60_000),
        });
        const body = (await response.json().catch(() => null)) as { error?: unknown } | null;
        answers.push({
          startedAt,
          status: response.status,
          ms: Date.now() - startedAt,
          retryAfter: response.headers.has('retry-after'),
          jsonError: typeof body?.error === 'string',
        });
      } catch (error) {
        const timeout = error instanceof Error && error.name === 'TimeoutError';
        answers.push({
          startedAt,
          status: timeout ? 'timeout' : 'network',
          ms: Date.now() - startedAt,
          retryAfter: false,
          jsonError: false,
        });
      }
      await sleep(50);
    }
  };
  const clients = [0, 1, 2, 3].map(client);
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(clients);
    },
  };
}

function byStatus(answers: Answer[]): string {
  const counts = new Map<string, number>();
  for (const answer of answers) counts.set(String(answer.status), (counts.get(String(answer.status)) ?? 0) + 1);
  return (
    [...counts.entries()]
      .sort()
      .map(([status, count]) => `${status}: ${fmt(count)}`)
      .join(', ') || 'none'
  );
}

interface Probe {
  at: number;
  port: number | null;
}

/**
 * A fresh connection through HAProxy every 100 ms, each committing a transaction id
 * (a write: with synchronous_mode it returns once the standby has it, or once Patroni
 * has let the primary go on alone); a probe that takes over 2 s counts as failed.
 */
function startWriteProbe(url: string) {
  const probes: Probe[] = [];
  let running = true;
  const once = async (): Promise<number | null> => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    client.on('error', () => undefined);
    const attempt = (async () => {
      await client.connect();
      const { rows } = await client.query<{ port: number }>(
        'SELECT txid_current(), inet_server_port() AS port WHERE NOT pg_is_in_recovery()',
      );
      return rows[0]?.port ?? null;
    })();
    const result = await Promise.race([attempt.catch(() => null), sleep(2000).then(() => null)]);
    void client.end().catch(() => undefined);
    return result;
  };
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      probes.push({ at, port: await once() });
      await sleep(Math.max(0, 100 - (Date.now() - at)));
    }
  })();
  return {
    probes,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** Samples ingest's stored-messages counter every 200 ms. */
function startCommitSampler(system: RunningSystem) {
  const samples: Array<{ at: number; stored: number }> = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      const text = await scrape(system.ingest());
      if (text !== '') samples.push({ at, stored: metricSum(text, 'gantry_ingest_messages_stored_total') });
      await sleep(200);
    }
  })();
  return {
    samples,
    async stop() {
      running = false;
      await loop;
    },
  };
}

interface Gap {
  /** When the first write reached the new primary. */
  endedAt: number;
  withoutPrimary: number;
  firstCommit: number | null;
  answers: string;
}

/**
 * Runs one fault and measures it: the gap is from the last write on the old primary
 * (the fault's start when the node is killed) to the first write on the new one; the
 * first batch is ingest's first commit on the new primary, from the fault's start.
 */
async function measureFault(
  report: DrillReport,
  cluster: PatroniCluster,
  system: RunningSystem,
  dashboard: ReturnType<typeof startDashboard>,
  label: string,
  fault: (leader: string, standby: string) => Promise<void>,
): Promise<Gap> {
  const { leader, sync } = await cluster.waitHealthy();
  const oldPort = cluster.nodes.find((node) => node.name === leader)!.pgPort;
  const newPort = cluster.nodes.find((node) => node.name === sync)!.pgPort;
  const probe = startWriteProbe(cluster.url('postgres'));
  const commits = startCommitSampler(system);
  await sleep(1000);
  const faultAt = Date.now();
  await fault(leader, sync);
  report.step(`${label}: fault done on ${leader} (standby ${sync})`);
  await system.until(
    `a write on ${sync}`,
    () => probe.probes.some((entry) => entry.at >= faultAt && entry.port === newPort),
    5 * 60_000,
  );
  const gapEnd = probe.probes.find((entry) => entry.at >= faultAt && entry.port === newPort)!.at;
  const lastOld = probe.probes.filter((entry) => entry.port === oldPort && entry.at < gapEnd).at(-1)?.at ?? faultAt;
  const gapStart = Math.max(faultAt, lastOld);
  // Ingest's count as the new primary took its first write: the next increase is a batch
  // committed there (to the sampling grain, 200 ms); one committed on the old primary
  // just before its demotion is in the baseline.
  const storedAtGapEnd = [...commits.samples].reverse().find((sample) => sample.at <= gapEnd)?.stored ?? 0;
  const committedOnNew = (sample: { at: number; stored: number }) =>
    sample.at > gapEnd && sample.stored > storedAtGapEnd;
  await system.until('an ingest commit on the new primary', () => commits.samples.some(committedOnNew), 5 * 60_000);
  await probe.stop();
  await commits.stop();
  const firstCommitAt = commits.samples.find(committedOnNew)?.at;
  const during = dashboard.answers.filter((answer) => answer.startedAt >= gapStart && answer.startedAt <= gapEnd);
  const gap: Gap = {
    endedAt: gapEnd,
    withoutPrimary: (gapEnd - gapStart) / 1000,
    firstCommit: firstCommitAt === undefined ? null : (firstCommitAt - faultAt) / 1000,
    answers: byStatus(during),
  };
  report.step(`${label}: ${sync} is the primary`, {
    'seconds without a primary': gap.withoutPrimary.toFixed(1),
    'seconds until the first batch commits (from the fault)': gap.firstCommit?.toFixed(1) ?? '—',
    'API answers during the gap': gap.answers,
  });
  return gap;
}

export async function failoverDrill({ report, cleanup, devices }: DrillContext): Promise<void> {
  const messages = Number(process.env.DRILL_FAILOVER_MESSAGES ?? 150_000);
  const rate = Number(process.env.DRILL_FAILOVER_RATE ?? 1000);
  if (!patroniAvailable())
    throw new Error(
      'patroni, patronictl, etcd, haproxy and PostgreSQL must be installed (apt-get install patroni etcd-server haproxy)',
    );
  const cluster = await startPatroniCluster();
  cleanup.add('Patroni cluster (etcd, Patroni, PostgreSQL, HAProxy)', () => cluster.stop());
  const healthy = await cluster.waitHealthy();
  const admin = new pg.Client({ connectionString: cluster.url('postgres') });
  await admin.connect();
  await admin.query('CREATE DATABASE gantry_failover_test');
  await admin.end();
  const url = cluster.url('gantry_failover_test');
  await migrateForDrill(url);
  const pool = createPool(url, { max: 6, applicationName: 'gantry-drill' });
  cleanup.add('drill pool', () => pool.end());
  const broker = await startTestBroker();
  cleanup.add('broker', () => broker.stop());
  report.step(
    `Patroni cluster up: ${healthy.leader} leads, ${healthy.sync} its synchronous standby; Gantry's database through HAProxy (${url}); Mosquitto on port ${broker.port}`,
  );

  const gaps: Array<[string, Gap]> = [];
  let dashboard: ReturnType<typeof startDashboard> | null = null;
  await runIngestDrill(
    {
      report,
      cleanup,
      label: 'failover',
      databaseUrl: url,
      pool,
      brokerUrl: broker.url,
      messages,
      devices: Math.min(devices, 200),
      publishRate: rate,
    },
    async (system) => {
      const { rows } = await pool.query<{ id: string }>('SELECT id FROM tenants LIMIT 1');
      const key = await provisioning.createApiKey({ pool, outbox: createOutbox({ maxAttempts: 3 }) }, rows[0]!.id, {
        name: 'dashboard',
      });
      const api: ServiceProcess = await spawnService('api', {
        env: {
          GANTRY_DATABASE_URL: url,
          GANTRY_RATE_LIMIT_PER_SECOND: '100000',
          GANTRY_RATE_LIMIT_BURST: '100000',
        },
      });
      cleanup.add('api', () => api.kill());
      dashboard = startDashboard(api.url, key.key);
      cleanup.add('dashboard', () => dashboard!.stop());
      report.step(`API (pid ${api.pid}) under a dashboard's load (4 clients, ${DASHBOARD_PATHS.length} endpoints)`);
      const total = system.plan.total;

      await system.waitForSilver(Math.round(total * 0.25));
      let killed = '';
      gaps.push([
        'primary lost',
        await measureFault(report, cluster, system, dashboard, 'primary lost', async (leader) => {
          killed = leader;
          await cluster.killNode(leader);
        }),
      ]);
      await cluster.startNode(killed);
      const rejoined = await cluster.waitHealthy();
      report.step(`${killed} started again: ${rejoined.leader} leads, ${rejoined.sync} its synchronous standby`);

      await system.waitForSilver(Math.round(total * 0.6));
      gaps.push([
        'switchover',
        await measureFault(report, cluster, system, dashboard, 'switchover', async (leader, standby) => {
          const output = await cluster.switchover(leader, standby);
          const outcome = output
            .split('\n')
            .find((line) => /switched over|switchover/i.test(line) && !line.includes('|'));
          report.step(`patronictl switchover: ${outcome?.trim() ?? 'done'}`);
        }),
      ]);
      await cluster.waitHealthy();
      // The dashboard goes on a little while on the new primary, then leaves the counts alone.
      await sleep(10_000);
      await dashboard.stop();
    },
  );
  const answers = dashboard!.answers;
  const lastGapEnd = Math.max(...gaps.map(([, gap]) => gap.endedAt));
  const failed = answers.filter((answer) => answer.status !== 200 && answer.status !== 503);
  const unexplained503 = answers.filter((answer) => answer.status === 503 && !(answer.retryAfter && answer.jsonError));
  const slowest = answers.reduce((most, answer) => Math.max(most, answer.ms), 0);
  for (const [label, gap] of gaps) {
    report.count(`${label}: seconds without a primary`, gap.withoutPrimary.toFixed(1));
    report.count(`${label}: seconds until the first batch commits`, gap.firstCommit?.toFixed(1) ?? '—');
    report.count(`${label}: API answers during the gap`, gap.answers);
  }
  report.count('API answers over the run', byStatus(answers));
  report.count('API slowest answer (ms)', slowest);
  report.check(
    'the API answered 200 or 503 (with Retry-After and a JSON error), never a 500 or a hang',
    failed.length === 0 && unexplained503.length === 0 && answers.length > 0,
    `${fmt(answers.length)} answers: ${byStatus(answers)}; slowest ${fmt(slowest)} ms`,
  );
  report.check(
    'the API served again after each failover',
    answers.some((answer) => answer.status === 200 && answer.startedAt > lastGapEnd),
    `${fmt(answers.filter((answer) => answer.status === 200 && answer.startedAt > lastGapEnd).length)} answers 200 after the last gap`,
  );
}
