/**
 * `pnpm drill [name…]` — the fault drills of issue 10, each printing what it did and
 * what it counted, then PASS/FAIL per check; exits 1 on any FAIL. See docs/drills.md.
 *
 *   kill              SIGKILL of ingest and of the worker during a DRILL_MESSAGES run
 *   postgres-restart  a private PostgreSQL stopped for DRILL_POSTGRES_DOWN_SECONDS mid-run
 *   broker-restart    the broker restarted, then down for DRILL_BROKER_DOWN_SECONDS, mid-run
 *   webhook-down      the webhook receiver down for DRILL_WEBHOOK_DOWN_SECONDS while events flow
 *   broker-node       a NATS cluster node, then an ingest process, SIGKILLed while devices publish
 *                     (only when named: it needs nats-server)
 *   failover          Patroni (2 nodes, etcd, HAProxy): the primary node killed, then a switchover
 *                     (only when named: it needs patroni, etcd and haproxy)
 *   restore           pgBackRest: full backup, point-in-time restore, Gantry on the restored copy
 *                     (only when named: it needs pgbackrest)
 *
 * Env: DRILL_MESSAGES (1,000,000 readings per ingest drill), DRILL_DEVICES (500),
 * DRILL_POSTGRES_DOWN_SECONDS (10), DRILL_BROKER_DOWN_SECONDS (10),
 * DRILL_WEBHOOK_DOWN_SECONDS (120), DRILL_BROKER_NODE_RATE (1,000 msg/s) and
 * DRILL_BROKER_NODE_SECONDS (60) for broker-node, DRILL_FAILOVER_MESSAGES (150,000) and
 * DRILL_FAILOVER_RATE (1,000 msg/s) for failover, DRILL_RESTORE_MESSAGES (60,000) for restore,
 * GANTRY_TEST_DATABASE_URL (the server for the drills' databases, default
 * postgresql://postgres@127.0.0.1:5432).
 */
import os from 'node:os';
import { killAllServices } from '../support/processes.ts';
import { brokerNodeDrill } from './drills/broker-node.ts';
import { brokerRestartDrill } from './drills/broker-restart.ts';
import { failoverDrill } from './drills/failover.ts';
import { killDrill } from './drills/kill.ts';
import { postgresRestartDrill } from './drills/postgres-restart.ts';
import { restoreDrill } from './drills/restore.ts';
import { webhookDownDrill } from './drills/webhook-down.ts';
import { Cleanup, DrillReport, fmt, type DrillContext } from './report.ts';

interface Drill {
  name: string;
  title: (context: { messages: number }) => string;
  run: (context: DrillContext) => Promise<void>;
  /** Run only when named (it needs more than the tests do). */
  onRequest?: boolean;
}

const drills: Drill[] = [
  {
    name: 'kill',
    title: ({ messages }) => `SIGKILL of ingest and of the worker during a ${fmt(messages)}-reading run`,
    run: killDrill,
  },
  {
    name: 'postgres-restart',
    title: () => 'PostgreSQL stopped and started again during ingest',
    run: postgresRestartDrill,
  },
  {
    name: 'broker-restart',
    title: () => 'broker restarted, then down for a while, during ingest',
    run: brokerRestartDrill,
  },
  { name: 'webhook-down', title: () => 'webhook receiver down while events are produced', run: webhookDownDrill },
  {
    name: 'broker-node',
    title: () => 'a node of a three-node NATS cluster, then one of two ingest processes, killed mid-stream',
    run: brokerNodeDrill,
    onRequest: true,
  },
  {
    name: 'failover',
    title: () => 'Patroni failover under ingest and API load: the primary node killed, then a switchover',
    run: failoverDrill,
    onRequest: true,
  },
  {
    name: 'restore',
    title: () => 'pgBackRest backup restored to a point in time, Gantry started on the copy',
    run: restoreDrill,
    onRequest: true,
  },
];

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw.replace(/[_,]/g, ''));
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer (got "${raw}")`);
  return value;
}

async function main(): Promise<number> {
  const names = process.argv.slice(2).filter((arg) => arg !== '--');
  const unknown = names.filter((name) => !drills.some((drill) => drill.name === name));
  if (unknown.length > 0) {
    console.error(`unknown drill: ${unknown.join(', ')}; drills: ${drills.map((drill) => drill.name).join(', ')}`);
    return 2;
  }
  const selected =
    names.length === 0
      ? drills.filter((drill) => !drill.onRequest)
      : drills.filter((drill) => names.includes(drill.name));
  const messages = positiveInt('DRILL_MESSAGES', 1_000_000);
  const devices = Math.min(positiveInt('DRILL_DEVICES', 500), messages);

  let current: Cleanup | null = null;
  // Ctrl-C or SIGTERM: clean up what the running drill holds (processes, broker, databases), then exit.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.removeAllListeners(signal);
    process.once(signal, () => {
      console.error(`\n${signal}: cleaning up`);
      void Promise.resolve(current?.runAll())
        .then(() => killAllServices())
        .finally(() => process.exit(130));
    });
  }

  const ingestDrills = selected.some((drill) => drill.name !== 'webhook-down' && drill.name !== 'broker-node');
  console.log(
    `gantry drills: ${selected.map((drill) => drill.name).join(', ')} — ` +
      (ingestDrills ? `${fmt(messages)} readings from ${fmt(devices)} devices per ingest drill; ` : '') +
      `${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}, ${new Date().toISOString()}`,
  );
  const results: Array<{ name: string; passed: boolean; seconds: number }> = [];
  for (const drill of selected) {
    const report = new DrillReport(drill.name);
    const cleanup = new Cleanup();
    current = cleanup;
    console.log(`\n== ${drill.name}: ${drill.title({ messages })}`);
    try {
      await drill.run({ report, cleanup, messages, devices });
    } catch (error) {
      report.check(
        'the drill ran to its end',
        false,
        error instanceof Error ? error.message.split('\n')[0]!.slice(0, 400) : String(error),
      );
    } finally {
      await cleanup.runAll();
      await killAllServices();
      current = null;
    }
    report.step('cleaned up (processes, broker, databases)');
    report.print();
    results.push({ name: drill.name, passed: report.passed, seconds: report.seconds() });
  }

  console.log('\n== summary');
  for (const result of results)
    console.log(
      `  ${result.passed ? 'PASS' : 'FAIL'}  ${result.name.padEnd(18)} ${result.seconds.toFixed(0).padStart(5)} s`,
    );
  return results.every((result) => result.passed) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
