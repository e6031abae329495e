import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from 'nats';
import { createPublisher, publishMessages } from '@gantry/simulator';
import { MQTT_STREAM } from '../../../services/ingest/src/nats/jetstream-source.ts';
import { counterDrift, counterTables } from '../../../services/ingest/src/storage/counters.ts';
import { provisionFleetBulk, uniqueDeviceIds } from '../../support/ingest.ts';
import { startNatsCluster, type NatsCluster } from '../../support/nats-cluster.ts';
import { spawnService, type ServiceProcess } from '../../support/processes.ts';
import { createDrillDatabase } from '../database.ts';
import { fleetMessages, planFleet, storeExpectedKeys } from '../fleet.ts';
import { metricSum, scrape, storedCounts } from '../ingest-run.ts';
import { type DrillContext, fmt } from '../report.ts';

/** The node leading the MQTT messages stream: killing it costs the cluster an election. */
async function streamLeader(cluster: NatsCluster): Promise<number> {
  const connection = await connect({ servers: cluster.natsUrls });
  try {
    const info = await (await connection.jetstreamManager()).streams.info(MQTT_STREAM);
    return Math.max(
      0,
      cluster.nodes.findIndex((node) => node.name === info.cluster?.leader),
    );
  } finally {
    await connection.close();
  }
}

/** Silver's count sampled every 250 ms: the longest stretch without a commit after a moment. */
class CommitWatch {
  private last = 0;
  private readonly changes: number[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(read: () => Promise<number | null>) {
    this.timer = setInterval(() => {
      void read().then((count) => {
        if (count === null || count === this.last) return;
        this.last = count;
        this.changes.push(Date.now());
      });
    }, 250);
  }

  /** The longest gap between commits from `from` to the last commit before `to`. */
  longestPause(from: number, to = Date.now()): number {
    let previous = from;
    let longest = 0;
    for (const at of this.changes) {
      if (at <= from) continue;
      if (at > to) break;
      longest = Math.max(longest, at - previous);
      previous = at;
    }
    return longest;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * broker-node — ingest behind a three-node NATS cluster (docs/ingest.md, "Clustered
 * brokers"): two ingest processes share the durable JetStream consumer; devices publish
 * QoS 1 at DRILL_BROKER_NODE_RATE (1,000) msg/s for DRILL_BROKER_NODE_SECONDS (60) over
 * six connections spread over the nodes. At 30 % the node leading the MQTT message
 * stream is SIGKILLed (its devices reconnect to the next node and resend what was not
 * acknowledged), at 60 % one ingest process (what it held comes to the other after the
 * consumer's ack wait). Counts: published = stored once, counters = a recount, the
 * longest pause in commits after each kill, and the devices' resends.
 */
export async function brokerNodeDrill({ report, cleanup, devices }: DrillContext): Promise<void> {
  const rate = Number(process.env.DRILL_BROKER_NODE_RATE ?? 1000);
  const seconds = Number(process.env.DRILL_BROKER_NODE_SECONDS ?? 60);
  const total = rate * seconds;
  const db = await createDrillDatabase('broker_node');
  cleanup.add(`database ${db.name}`, () => db.drop());
  const cluster = await startNatsCluster(3);
  cleanup.add('NATS cluster', () => cluster.stop());
  report.step(
    `database ${db.name} migrated, 3 NATS nodes up (MQTT ports ${cluster.nodes.map((node) => node.mqttPort).join(', ')})`,
  );

  const deviceIds = uniqueDeviceIds(Math.min(devices, total), 'drill-node');
  const plan = planFleet({ deviceIds, total });
  const fleet = await provisionFleetBulk(db.pool, deviceIds, 'Drill terminal (broker-node)');
  await storeExpectedKeys(
    db.pool,
    plan,
    deviceIds.map((deviceId) => fleet.byDeviceId.get(deviceId)!.id),
  );
  report.step(`${fmt(deviceIds.length)} devices provisioned, ${fmt(total)} readings planned`);

  const ingests: ServiceProcess[] = [];
  for (const name of ['a', 'b']) {
    const ingest = await spawnService('ingest', {
      env: {
        GANTRY_DATABASE_URL: db.url,
        GANTRY_INGEST_SOURCE: 'nats',
        GANTRY_NATS_URLS: cluster.natsUrls.join(','),
        GANTRY_INGEST_CLIENT_ID: `gantry-ingest-drill-node-${name}`,
      },
    });
    ingests.push(ingest);
    cleanup.add(`ingest ${name}`, () => ingest.kill());
  }
  report.step(`2 ingest processes (pids ${ingests.map((ingest) => ingest.pid).join(', ')}) share the consumer`);

  const silver = () =>
    db.pool.query<{ count: string }>('SELECT count(*) FROM telemetry_readings').then(
      (result) => Number(result.rows[0]!.count),
      () => null,
    );
  const watch = new CommitWatch(silver);
  cleanup.add('commit watch', async () => watch.stop());

  const publisher = await createPublisher({
    mqttUrl: cluster.mqttUrls[0]!,
    mqttUrls: cluster.mqttUrls,
    connections: 6,
    window: 500,
    clientIdPrefix: `drill-node-${deviceIds[0]}`,
  });
  cleanup.add('publisher', () => publisher.close());
  const publishing = publishMessages(publisher, fleetMessages(plan), { rate });
  publishing.catch(() => undefined);
  report.step(`publishing QoS 1 at ${fmt(rate)} msg/s over 6 connections, 2 starting on each node`);

  const until = async (what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = 10 * 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await predicate())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(200);
    }
  };
  const counts = async () => ({
    acknowledged: publisher.stats.acked,
    silver: (await silver()) ?? 0,
    resent: publisher.stats.resent ?? 0,
  });

  await until('30 % acknowledged', () => publisher.stats.acked >= total * 0.3);
  const leader = await streamLeader(cluster);
  const nodeKilledAt = Date.now();
  await cluster.kill(leader);
  report.step(
    `SIGKILL node ${cluster.nodes[leader]!.name} (pid ${cluster.nodes[leader]!.pid()}), the stream leader`,
    await counts(),
  );

  await until('60 % acknowledged', () => publisher.stats.acked >= total * 0.6);
  const nodePause = watch.longestPause(nodeKilledAt);
  const victim = ingests[0]!;
  const unacknowledged = metricSum(await scrape(victim), 'gantry_ingest_unacknowledged_messages');
  const ingestKilledAt = Date.now();
  await victim.kill();
  report.step(`SIGKILL ingest a (pid ${victim.pid})`, { ...(await counts()), 'un-acknowledged in it': unacknowledged });

  const published = await publishing;
  await publisher.flush();
  report.step('publisher done: every message acknowledged by the cluster', await counts());

  let stored = (await silver()) ?? 0;
  let lastChange = Date.now();
  while (stored < total && Date.now() - lastChange < 120_000) {
    await sleep(1000);
    const now = (await silver()) ?? stored;
    if (now !== stored) lastChange = Date.now();
    stored = now;
  }
  const ingestPause = watch.longestPause(ingestKilledAt, lastChange);
  watch.stop();
  report.step(stored >= total ? 'every planned reading is in silver' : 'silver stopped growing short of the plan', {
    silver: stored,
  });
  const survivor = ingests[1]!;
  const redelivered = metricSum(await scrape(survivor), 'gantry_ingest_messages_redelivered_total');
  await survivor.stop();
  await publisher.close();

  const c = await storedCounts(db.pool);
  const duplicated = c.rows! - c.distinct_keys!;
  const drift = await Promise.all(counterTables.map((table) => counterDrift(db.pool, table)));
  report.count('published (acknowledged by the cluster)', published);
  report.count('stored (silver rows)', c.rows!);
  report.count('duplicates (silver rows − distinct keys)', duplicated);
  report.count('lost (published, not in silver)', c.lost!);
  report.count('unexpected (in silver, never published)', c.unexpected!);
  report.count('bronze rows / of them duplicate copies', `${fmt(c.bronze_rows!)} / ${fmt(c.duplicate!)}`);
  report.count('device resends after a reconnect', publisher.stats.resent ?? 0);
  report.count('device reconnects', publisher.stats.reconnects ?? 0);
  report.count('redelivered to the surviving ingest', redelivered);
  report.count('longest pause in commits after the node kill (s)', (nodePause / 1000).toFixed(1));
  report.count('longest pause in commits after the ingest kill (s)', (ingestPause / 1000).toFixed(1));

  report.check('every message acknowledged', published === total, `${fmt(published)} of ${fmt(total)}`);
  report.check('no reading lost', c.lost === 0, `lost ${fmt(c.lost!)}`);
  report.check('no reading stored twice', duplicated === 0, `duplicated ${fmt(duplicated)}`);
  report.check('nothing unexpected in silver', c.unexpected === 0, `unexpected ${fmt(c.unexpected!)}`);
  report.check(
    'bronze counts each stored reading once',
    c.bronze_readings === c.rows && c.rejected === 0,
    `sum(reading_count) ${fmt(c.bronze_readings!)}, rejected ${fmt(c.rejected!)}, duplicate copies ${fmt(c.duplicate!)}`,
  );
  report.check(
    'traffic counters equal a recount of bronze and silver',
    drift.every((rows) => rows === 0),
    counterTables.map((table, index) => `${table}: ${drift[index]} rows differ`).join(', '),
  );
}
