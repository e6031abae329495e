import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createPublisher,
  encodeMessage,
  fleetTraffic,
  publishMessages,
  type Publisher,
  type PublisherOptions,
} from '@gantry/simulator';
import { MQTT_STREAM } from '../../services/ingest/src/nats/jetstream-source.ts';
import { counterDrift, counterTables } from '../../services/ingest/src/storage/counters.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import {
  countOf,
  provisionFleetBulk,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type TestIngest,
} from '../support/ingest.ts';
import { natsServerPath, startNatsCluster, type NatsCluster } from '../support/nats-cluster.ts';

/**
 * Ingest behind a three-node NATS cluster (docs/ingest.md, "Clustered brokers"): devices
 * publish MQTT to every node, two ingest instances share one durable JetStream consumer,
 * and a node is killed with SIGKILL mid-stream.
 */
const MESSAGES = 3000;

let db: TestDatabase | undefined;
let cluster: NatsCluster | undefined;
const ingests: TestIngest[] = [];
const publishers: Publisher[] = [];

/** The node leading the MQTT messages stream (the one whose death costs the most). */
async function streamLeader(cluster: NatsCluster): Promise<number> {
  const connection = await connect({ servers: cluster.natsUrls.filter((_, index) => cluster.nodes[index]!.running()) });
  try {
    const manager = await connection.jetstreamManager();
    const info = await manager.streams.info(MQTT_STREAM);
    return cluster.nodes.findIndex((node) => node.name === info.cluster?.leader);
  } finally {
    await connection.close();
  }
}

/** A publisher once its node's gateway accepts it (a JetStream election may be under way after a kill). */
async function connectPublisher(options: PublisherOptions): Promise<Publisher> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      const publisher = await createPublisher(options);
      publishers.push(publisher);
      return publisher;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(500);
    }
  }
}

describe.skipIf(natsServerPath() === null)('ingest behind a three-node NATS cluster', () => {
  beforeAll(async () => {
    db = await createTestDatabase('ingest_nats');
    cluster = await startNatsCluster(3);
    for (let index = 0; index < 2; index += 1)
      ingests.push(
        await startTestIngest({
          pool: db.pool,
          databaseUrl: db.url,
          mqttUrl: 'mqtt://unused.invalid',
          env: { GANTRY_INGEST_SOURCE: 'nats', GANTRY_NATS_URLS: cluster.natsUrls.join(',') },
        }),
      );
  }, 180_000);

  afterAll(async () => {
    for (const publisher of publishers) await publisher.close().catch(() => undefined);
    for (const ingest of ingests) await ingest.stop().catch(() => undefined);
    await cluster?.stop();
    await db?.drop();
  }, 60_000);

  it('stores every acknowledged message once when the stream leader is killed mid-stream, with counters equal to a recount', async () => {
    const { pool } = db!;
    const deviceIds = uniqueDeviceIds(30, 'nats');
    await provisionFleetBulk(pool, deviceIds, 'NATS cluster terminal');
    // Three connections, one starting on each node; each moves to the next node when its own dies.
    const publisher = await connectPublisher({
      mqttUrl: cluster!.mqttUrls[0]!,
      mqttUrls: cluster!.mqttUrls,
      connections: 3,
      window: 200,
    });
    const traffic = fleetTraffic({ deviceIds, count: MESSAGES, start: Date.now() - 3_600_000 });
    const publishing = publishMessages(publisher, traffic, { rate: 400 });
    await waitFor(
      async () => publisher.stats.acked,
      (acked) => acked >= MESSAGES / 3,
      60_000,
      'a third of the messages acknowledged',
    );
    const leader = await streamLeader(cluster!);
    await cluster!.kill(leader);
    expect(await publishing).toBe(MESSAGES);
    await publisher.flush();
    // The node's own connection and the others' resends after it died.
    expect(publisher.stats.reconnects).toBeGreaterThanOrEqual(1);

    await waitFor(
      () => countOf(pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= MESSAGES,
      120_000,
      'every acknowledged message in silver',
    );
    // Redelivered copies may still be committing: wait until bronze holds still for 2 s.
    let bronze = await countOf(pool, 'SELECT count(*) FROM device_messages');
    for (;;) {
      await sleep(2000);
      const now = await countOf(pool, 'SELECT count(*) FROM device_messages');
      if (now === bronze) break;
      bronze = now;
    }

    expect(await countOf(pool, 'SELECT count(*) FROM telemetry_readings')).toBe(MESSAGES);
    expect(await countOf(pool, 'SELECT count(DISTINCT (device_id, type, ts)) FROM telemetry_readings')).toBe(MESSAGES);
    // Copies resent by devices or redelivered by the cluster are kept in bronze as duplicates, never counted twice.
    expect(
      await countOf(
        pool,
        "SELECT coalesce(sum(reading_count), 0) AS count FROM device_messages WHERE status <> 'duplicate'",
      ),
    ).toBe(MESSAGES);
    for (const table of counterTables) expect(await counterDrift(pool, table), table).toBe(0);
  }, 180_000);

  it('acknowledges a publish only once a quorum of nodes stores it: with one node of three left there is no PUBACK', async () => {
    const { pool } = db!;
    const [deviceId] = uniqueDeviceIds(1, 'quorum');
    await provisionFleetBulk(pool, [deviceId!], 'NATS quorum terminal');
    const alive = cluster!.nodes.flatMap((node, index) => (node.running() ? [index] : []));
    expect(alive).toHaveLength(2);
    const [kept, stopped] = alive as [number, number];
    const publisher = await connectPublisher({ mqttUrl: cluster!.mqttUrls[kept]! });
    await cluster!.kill(stopped);

    const [message] = [...fleetTraffic({ deviceIds: [deviceId!], count: 1, start: Date.now() - 60_000 })];
    const { topic, payload } = encodeMessage(message!);
    await publisher.publish(topic, payload);
    // Only the absence of a PUBACK is timed here: a slow machine cannot make one appear.
    await sleep(3000);
    expect(publisher.stats.acked).toBe(0);

    await cluster!.start(stopped);
    await waitFor(
      async () => publisher.stats.acked,
      (acked) => acked === 1,
      120_000,
      'the PUBACK after quorum',
    );
    await waitFor(
      () =>
        countOf(
          pool,
          'SELECT count(*) FROM telemetry_readings r JOIN devices d ON d.id = r.device_id WHERE d.device_id = $1',
          [deviceId],
        ),
      (count) => count === 1,
      120_000,
      'the reading in silver',
    );
  }, 240_000);
});
