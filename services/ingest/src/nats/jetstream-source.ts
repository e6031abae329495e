import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  connect,
  DeliverPolicy,
  Events,
  nanos,
  RetentionPolicy,
  StorageType,
  type Consumer,
  type JsMsg,
  type NatsConnection,
} from 'nats';
import { TOPIC_PREFIX } from '@gantry/contracts';
import type { Logger } from '@gantry/logger';
import { ingestMetrics, noteUnacknowledged } from '../metrics.ts';

/**
 * Ingest behind a NATS cluster (docs/ingest.md, "Clustered brokers").
 *
 * Devices publish MQTT to any node. NATS' MQTT gateway writes every QoS 1 PUBLISH into
 * the JetStream stream `$MQTT_msgs` (replicated on `stream_replicas` nodes) and sends
 * the PUBACK only once that write is acknowledged, which in a cluster means a quorum
 * of the stream's replicas holds it. Ingest does not speak MQTT here: every process
 * pulls from one durable consumer on that stream (replicated too), so the processes
 * share the stream with no configuration of their own, and acknowledges each message
 * after its batch committed. A message not acknowledged within ACK_WAIT (its process
 * died) goes to another process.
 */
export const MQTT_STREAM = '$MQTT_msgs';
const MQTT_SUBJECT_PREFIX = '$MQTT.msgs.';
/** NATS maps the MQTT topic separator `/` to `.`: `gantry/v1/devices/d1/gps` is `$MQTT.msgs.gantry.v1.devices.d1.gps`. */
export const DEVICE_SUBJECTS = `${MQTT_SUBJECT_PREFIX}${TOPIC_PREFIX.replaceAll('/', '.')}.>`;
/** One consumer for every ingest process: the shared work queue. */
export const INGEST_CONSUMER = 'gantry-ingest';
/** How long a delivered message may stay unacknowledged before another process gets it. */
const ACK_WAIT_MS = 30_000;
/** Messages asked for per pull request. */
const PULL_SIZE = 500;
/** How long a pull request waits on the server for messages. */
const PULL_EXPIRES_MS = 2_000;

/** The MQTT topic a subject of the stream came from. NATS 2.9 refuses `.` in MQTT topics, so the mapping reverses exactly. */
export function topicOfSubject(subject: string): string {
  return subject.slice(MQTT_SUBJECT_PREFIX.length).replaceAll('.', '/');
}

export interface NatsSourceOptions {
  servers: string[];
  replicas: number;
  /** Shown in the server's connection list. */
  name: string;
  maxInFlight: number;
  maxInFlightBytes: number;
  /** How long start-up may take (the cluster electing its leaders) before it fails. */
  connectTimeoutMs: number;
  logger: Logger;
  onMessage(message: { topic: string; payload: Buffer; redelivered: boolean }, settle: () => void): void;
  /** The in-flight window is full and pulling stops until acknowledgements free it. */
  onFull?(): void;
}

export interface NatsSource {
  isConnected(): boolean;
  /** Stops pulling (before the final flush). */
  pause(): void;
  flushAcks(): void;
  close(): Promise<void>;
}

async function ensureStreamAndConsumer(connection: NatsConnection, replicas: number): Promise<void> {
  const manager = await connection.jetstreamManager();
  // The MQTT gateway creates the stream when the first device connects. Until a consumer
  // exists its interest retention drops what arrives (acknowledged to the device), so
  // ingest creates the stream itself, with the gateway's own settings, if it comes first.
  const stream = await manager.streams.info(MQTT_STREAM).catch((error: unknown) => {
    if (isNotFound(error)) return null;
    throw error;
  });
  if (!stream)
    await manager.streams.add({
      name: MQTT_STREAM,
      subjects: [`${MQTT_SUBJECT_PREFIX}>`],
      storage: StorageType.File,
      retention: RetentionPolicy.Interest,
      num_replicas: replicas,
    });
  // Adding a consumer that exists with the same settings is a no-op: every process can do it.
  await manager.consumers.add(MQTT_STREAM, {
    durable_name: INGEST_CONSUMER,
    filter_subject: DEVICE_SUBJECTS,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(ACK_WAIT_MS),
    max_ack_pending: -1,
    num_replicas: replicas,
  });
}

function isNotFound(error: unknown): boolean {
  return (error as { api_error?: { err_code?: number } }).api_error?.err_code === 10059;
}

async function openConsumer(options: NatsSourceOptions): Promise<{ connection: NatsConnection; consumer: Consumer }> {
  const deadline = Date.now() + options.connectTimeoutMs;
  for (;;) {
    let connection: NatsConnection | undefined;
    try {
      connection = await connect({
        servers: options.servers,
        name: options.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 500,
      });
      await ensureStreamAndConsumer(connection, options.replicas);
      const consumer = await connection.jetstream().consumers.get(MQTT_STREAM, INGEST_CONSUMER);
      return { connection, consumer };
    } catch (error) {
      await connection?.close().catch(() => undefined);
      if (Date.now() > deadline)
        throw new Error(
          `could not open the JetStream consumer on ${options.servers.join(', ')}: ${(error as Error).message}`,
        );
      options.logger.warn({ err: { message: (error as Error).message } }, 'NATS not ready; retrying');
      await sleep(1000);
    }
  }
}

/**
 * Pulls device messages from the durable consumer, at most `maxInFlight` messages (and
 * `maxInFlightBytes`) unacknowledged at a time, and acknowledges each once settled.
 * The client fails over between the listed servers by itself; a pull lost with its
 * node is asked again, and what it had delivered unacknowledged comes back after ACK_WAIT.
 */
export async function openNatsSource(options: NatsSourceOptions): Promise<NatsSource> {
  const log = options.logger;
  const { connection, consumer } = await openConsumer(options);
  let connected = true;
  ingestMetrics.connected.set(1);
  log.info(
    { servers: options.servers, consumer: INGEST_CONSUMER, filter: DEVICE_SUBJECTS },
    'ingest pulling from NATS',
  );
  void (async () => {
    for await (const status of connection.status()) {
      if (status.type === Events.Disconnect) {
        connected = false;
        ingestMetrics.connected.set(0);
        log.warn({ server: status.data }, 'NATS connection lost; failing over');
      } else if (status.type === Events.Reconnect) {
        connected = true;
        ingestMetrics.connected.set(1);
        log.info({ server: status.data }, 'NATS reconnected');
      }
    }
  })();

  let unacked = 0;
  let unackedBytes = 0;
  let paused = false;
  let freed: (() => void) | null = null;
  const hasRoom = () => unacked < options.maxInFlight / 2 && unackedBytes < options.maxInFlightBytes / 2;

  const deliver = (message: JsMsg) => {
    const bytes = message.data.length;
    unacked += 1;
    unackedBytes += bytes;
    noteUnacknowledged(unacked);
    let settled = false;
    options.onMessage(
      { topic: topicOfSubject(message.subject), payload: Buffer.from(message.data), redelivered: message.redelivered },
      () => {
        if (settled) return;
        settled = true;
        message.ack();
        unacked -= 1;
        unackedBytes -= bytes;
        noteUnacknowledged(unacked);
        if (freed && hasRoom()) {
          freed();
          freed = null;
        }
      },
    );
  };

  const pulling = (async () => {
    while (!paused) {
      if (!hasRoom()) {
        options.onFull?.();
        await new Promise<void>((resolve) => {
          freed = resolve;
        });
        continue;
      }
      try {
        const batch = Math.min(PULL_SIZE, options.maxInFlight - unacked);
        const messages = await consumer.fetch({ max_messages: batch, expires: PULL_EXPIRES_MS });
        for await (const message of messages) {
          // Pulled after the stop began: handed back at once rather than after ACK_WAIT.
          if (paused) message.nak();
          else deliver(message);
        }
      } catch (error) {
        if (paused || connection.isClosed()) break;
        log.warn({ err: { message: (error as Error).message } }, 'NATS pull failed; retrying');
        await sleep(500);
      }
    }
  })();

  return {
    isConnected: () => connected && !connection.isClosed(),
    pause() {
      paused = true;
      freed?.();
    },
    flushAcks() {
      // Acknowledgements are published as messages settle; this pushes out what is buffered.
      connection.flush().catch(() => undefined);
    },
    async close() {
      paused = true;
      freed?.();
      // The open pull ends by itself within PULL_EXPIRES_MS; closing under it only logs noise.
      await Promise.race([pulling, sleep(2 * PULL_EXPIRES_MS)]);
      await connection.flush().catch(() => undefined);
      await connection.close();
      ingestMetrics.connected.set(0);
    },
  };
}
