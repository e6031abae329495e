import os from 'node:os';
import type { Config } from '@gantry/config';
import type { Pool, StorageMode } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { Batcher } from './batcher.ts';
import { ingestMetrics, noteReceivedMessage } from './metrics.ts';
import { openIngestConnection, type IngestConnection } from './mqtt/connection.ts';
import { openNatsSource } from './nats/jetstream-source.ts';
import { parseMessage, type TimeBounds } from './pipeline/steps.ts';

export interface IngestDeps {
  config: Config;
  pool: Pool;
  logger: Logger;
  storageMode: StorageMode;
  /**
   * Ingest stopped for good (another process took its MQTT session over, see
   * SessionTakenOverError). Default: log it and exit the process with code 1.
   */
  onFatal?: (error: Error) => void;
}

export interface RunningIngest {
  /** Flushes the open batch, acknowledges what committed, disconnects (keeping the session). */
  stop(): Promise<void>;
  isConnected(): boolean;
}

/** What ingest needs of where messages come from: one MQTT broker, or a NATS cluster's consumer (GANTRY_INGEST_SOURCE). */
type MessageSource = Pick<IngestConnection, 'isConnected' | 'pause' | 'flushAcks' | 'close'>;

/** Bytes of an oversized payload kept in bronze for diagnosis. */
export const OVERSIZED_PAYLOAD_BYTES = 4096;

/** The stable client id of this process: configured, or one per host. */
export function ingestClientId(config: Config): string {
  return config.ingest.clientId ?? `gantry-ingest-${os.hostname()}`.slice(0, 64);
}

/** A reading's time bounds against a clock (docs/ingest.md): not too far ahead, not older than silver's retention. */
export function timeBounds(config: Config, now: number): TimeBounds {
  return {
    maxFutureMs: config.ingest.maxFutureSeconds * 1000,
    maxAgeMs: config.retention.readingDays * 86_400_000,
    now,
  };
}

/**
 * Starts the ingest: subscribes over MQTT (persistent session, QoS 1), or pulls from a
 * NATS cluster's JetStream with GANTRY_INGEST_SOURCE=nats, runs every message
 * through the parse steps, writes batches (bronze + silver + device_state +
 * derivation_queue in one transaction) and acknowledges each message after its batch
 * committed. Resolves once subscribed.
 */
export async function startIngest(deps: IngestDeps): Promise<RunningIngest> {
  const { config, pool } = deps;
  const logger = deps.logger.child({ component: 'ingest' });
  const settings = config.ingest;

  const batcher = new Batcher({
    pool,
    logger,
    batchSize: settings.batchSize,
    batchMs: settings.batchMs,
    writers: settings.writers,
    method: settings.writeMethod,
    statementTimeoutMs: settings.statementTimeoutMs,
    oversizedPayloadBytes: OVERSIZED_PAYLOAD_BYTES,
  });

  const parseOptions = { maxPayloadBytes: settings.maxPayloadBytes, bounds: timeBounds(config, Date.now()) };
  const receive = (topic: string, payload: Buffer, redelivered: boolean, settle: () => void) => {
    const receivedAt = Date.now();
    // One options object for every message (parseMessage keeps no reference to it): only the clock moves.
    parseOptions.bounds.now = receivedAt;
    const message = parseMessage({ topic, payload, receivedAt }, parseOptions);
    noteReceivedMessage(message.messageType ?? 'unknown');
    if (redelivered) ingestMetrics.redelivered.inc();
    batcher.add({ message, settle });
  };
  // Nothing arrives while the window is full: waiting out the batch window would stall ingest.
  const onFull = () => batcher.seal();
  const connection: MessageSource =
    settings.source === 'nats'
      ? await openNatsSource({
          servers: config.nats.urls,
          replicas: config.nats.replicas,
          name: ingestClientId(config),
          maxInFlight: settings.maxInFlight,
          maxInFlightBytes: settings.maxInFlightBytes,
          connectTimeoutMs: 60_000,
          logger,
          onMessage: (message, settle) => receive(message.topic, message.payload, message.redelivered, settle),
          onFull,
        })
      : await openMqttSource();

  async function openMqttSource(): Promise<IngestConnection> {
    const url = config.mqtt.url;
    if (!url) throw new Error('ingest needs an MQTT broker: set GANTRY_MQTT_URL');
    return openIngestConnection({
      url,
      username: config.mqtt.username,
      password: config.mqtt.password,
      clientId: ingestClientId(config),
      sharedGroup: settings.sharedGroup,
      sessionExpirySeconds: settings.sessionExpirySeconds,
      maxInFlight: settings.maxInFlight,
      maxInFlightBytes: settings.maxInFlightBytes,
      connectTimeoutMs: 30_000,
      logger,
      onFatal(error) {
        logger.error({ err: { name: error.name, message: error.message } }, error.message);
        batcher.abortRetries();
        if (deps.onFatal) return deps.onFatal(error);
        // Also on stderr: the log may be JSON on stdout, read by nobody at this moment.
        process.stderr.write(`gantry ingest stopped: ${error.message}\n`);
        process.exit(1);
      },
      onPacket(packet, settle) {
        const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
        receive(packet.topic, payload, packet.dup, settle);
      },
      onFull,
    });
  }
  logger.info(
    {
      storageMode: deps.storageMode,
      batchSize: settings.batchSize,
      batchMs: settings.batchMs,
      writers: settings.writers,
    },
    'ingest started',
  );

  let stopping: Promise<void> | null = null;
  return {
    isConnected: () => connection.isConnected(),
    stop() {
      stopping ??= (async () => {
        connection.pause();
        const drained = await batcher.drain(settings.drainTimeoutMs);
        if (!drained) {
          batcher.abortRetries();
          logger.warn(
            { pending: batcher.pending },
            'ingest stopped before every batch committed; the broker redelivers the rest',
          );
        }
        connection.flushAcks();
        await connection.close();
        logger.info('ingest stopped');
      })();
      return stopping;
    },
  };
}
