import mqtt, { type IClientOptions, type IConnackPacket, type MqttClient } from 'mqtt';
import type { IPublishPacket } from 'mqtt-packet';
import { TOPIC_PREFIX } from '@gantry/contracts';
import type { Logger } from '@gantry/logger';
import { ingestMetrics, noteUnacknowledged } from '../metrics.ts';
import { attachDeferredAcks, type DeferredAcks } from './deferred-acks.ts';

export interface IngestConnectionOptions {
  url: string;
  username?: string | undefined;
  password?: string | undefined;
  clientId: string;
  /** Shared-subscription group ('' subscribes plainly). */
  sharedGroup: string;
  sessionExpirySeconds: number;
  maxInFlight: number;
  maxInFlightBytes: number;
  /** How long the first connection may take before start-up fails. */
  connectTimeoutMs: number;
  logger: Logger;
  onPacket(packet: IPublishPacket, settle: () => void): void;
  /** The in-flight window is full and reading stops until acknowledgements free it. */
  onFull?(): void;
  /**
   * The connection gave up for good (another client took the session over): ingest must
   * stop. Not called for outages, which are retried.
   */
  onFatal(error: Error): void;
}

export interface IngestConnection {
  protocolVersion: 4 | 5;
  /** The subscription filter in use. */
  filter: string;
  isConnected(): boolean;
  readonly unacked: number;
  /** Stops taking new messages (before the final flush). */
  pause(): void;
  flushAcks(): void;
  /** DISCONNECT, keeping the session (and anything it still holds) for the next start. */
  close(): Promise<void>;
}

export class MqttConnectError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MqttConnectError';
  }
}

/**
 * Two clients with one client id take the session from each other: the broker drops the
 * older connection, which reconnects and drops the newer one, and so on. Both keep
 * "working" while messages bounce between them, redelivered again and again.
 */
export class SessionTakenOverError extends Error {
  constructor(clientId: string, how: string) {
    super(
      `another MQTT client is using this ingest's client id "${clientId}" (${how}): two ingest processes ` +
        'must not share a client id. Give each process its own GANTRY_INGEST_CLIENT_ID (stable across restarts, ' +
        'so its session survives them); this one stops instead of taking the session back in a loop',
    );
    this.name = 'SessionTakenOverError';
  }
}

/** MQTT 5 DISCONNECT reason code 0x8E: Session taken over (sent by EMQX, HiveMQ, …). */
const SESSION_TAKEN_OVER = 0x8e;
/**
 * Mosquitto 2.0 closes the older connection without that DISCONNECT, and MQTT 3.1.1 has
 * none at all: connections the broker closes this soon after accepting them, this many
 * times in a row, are read as a takeover loop. (A broker restart closes one connection;
 * attempts while it is down are never accepted, so they do not count.)
 */
const SHORT_SESSION_MS = 5_000;
const SHORT_SESSIONS_TO_STOP = 3;

/** CONNACK codes meaning "this broker does not speak MQTT 5" (3.1.1 code 1, MQTT 5 code 0x84). */
const UNSUPPORTED_PROTOCOL = new Set([1, 132]);
/** Bad credentials or not authorised: retrying will not help. */
const REFUSED = new Set([4, 5, 134, 135]);

export const DEVICE_TOPICS = `${TOPIC_PREFIX}/#`;

interface Attempt {
  client: MqttClient;
  acks: DeferredAcks;
  connack: IConnackPacket;
}

/**
 * mqtt.js takes only acknowledgements and PINGRESP as signs of life, not PUBLISH: after
 * 1.5 × keepalive without them it drops the connection. A subscriber reading a backlog
 * (its window full, the PINGRESP queued behind megabytes of messages) hit that again and
 * again under sustained load, and each reconnect brought its whole window back as
 * redeliveries. Any packet from the broker proves the connection alive; a dead one
 * sends none, so the ping and its timeout still catch it.
 */
function keepAliveOnAnyPacket(client: MqttClient): void {
  let last = 0;
  client.on('packetreceive', () => {
    const now = Date.now();
    if (now - last < 1000) return;
    last = now;
    client.reschedulePing();
  });
}

function attempt(version: 4 | 5, options: IngestConnectionOptions): Promise<Attempt | 'unsupported'> {
  const receiveMaximum = Math.min(65535, options.maxInFlight);
  const clientOptions: IClientOptions = {
    protocolVersion: version,
    clientId: options.clientId,
    clean: false,
    username: options.username,
    password: options.password,
    keepalive: 30,
    reconnectPeriod: 1000,
    connectTimeout: 10_000,
    resubscribe: false,
    // A no-op logger skips mqtt.js' per-packet debug formatting.
    log: () => undefined,
    ...(version === 5 ? { properties: { sessionExpiryInterval: options.sessionExpirySeconds, receiveMaximum } } : {}),
  };
  const client = mqtt.connect(options.url, clientOptions);
  keepAliveOnAnyPacket(client);
  const acks = attachDeferredAcks(client, {
    // The broker should keep to our Receive Maximum (MQTT 5), but Mosquitto 2.0 stops
    // counting once PUBACKs flow (the drills saw ~500,000 in flight against 20,000), and
    // MQTT 3.1.1 has none: the local limit, per connection, is the bound that holds.
    maxUnacked: options.maxInFlight,
    maxUnackedBytes: options.maxInFlightBytes,
    onPacket: options.onPacket,
    onUnackedChange: noteUnacknowledged,
    ...(options.onFull ? { onFull: options.onFull } : {}),
  });
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = () => {
      settled = true;
      clearTimeout(timer);
      client.off('connect', onConnect);
    };
    const timer = setTimeout(() => {
      settle();
      client.end(true);
      reject(
        new MqttConnectError(
          `could not connect to the MQTT broker at ${redact(options.url)} within ${options.connectTimeoutMs} ms`,
        ),
      );
    }, options.connectTimeoutMs);
    const onConnect = (connack: IConnackPacket) => {
      settle();
      resolve({ client, acks, connack });
    };
    // Stays registered for the client's life: an 'error' without a listener would throw.
    client.on('error', (error: Error & { code?: unknown }) => {
      const code = typeof error.code === 'number' ? error.code : undefined;
      if (!settled && code !== undefined && UNSUPPORTED_PROTOCOL.has(code)) {
        settle();
        client.end(true);
        resolve('unsupported');
      } else if (!settled && code !== undefined && REFUSED.has(code)) {
        settle();
        client.end(true);
        reject(new MqttConnectError(`the MQTT broker refused the connection: ${error.message}`));
      } else {
        options.logger.warn({ err: { message: error.message, code: error.code } }, 'MQTT connection error; retrying');
      }
    });
    client.on('connect', onConnect);
  });
}

/** How long a stop waits for a clean DISCONNECT before dropping the connection. */
const CLOSE_TIMEOUT_MS = 5_000;

function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//****@');
}

async function subscribe(client: MqttClient, filter: string): Promise<void> {
  const granted = await client.subscribeAsync(filter, { qos: 1 });
  const failed = granted.find((grant) => grant.qos !== 1);
  if (failed) throw new MqttConnectError(`the broker refused the subscription ${filter} (granted ${failed.qos})`);
}

/**
 * Connects the ingest consumer: MQTT 5 with clean start off, a session expiry and a
 * Receive Maximum, subscribed through the shared group; falls back to MQTT 3.1.1
 * (clean session off, plain subscription) where the broker refuses MQTT 5 (aedes, the
 * embedded broker) and to a plain subscription where shared subscriptions are not
 * available.
 */
export async function openIngestConnection(options: IngestConnectionOptions): Promise<IngestConnection> {
  const log = options.logger;
  let result = await attempt(5, options);
  let version: 4 | 5 = 5;
  if (result === 'unsupported') {
    log.info(
      'the MQTT broker does not speak MQTT 5; using MQTT 3.1.1 with a persistent session and a plain subscription',
    );
    version = 4;
    result = await attempt(4, options);
    if (result === 'unsupported') throw new MqttConnectError('the MQTT broker accepts neither MQTT 5 nor MQTT 3.1.1');
  }
  const { client, acks, connack } = result;
  let shared = version === 5 && options.sharedGroup !== '';
  if (shared && connack.properties?.sharedSubscriptionAvailable === false) {
    log.warn('the MQTT broker has no shared subscriptions; subscribing plainly (run one ingest process only)');
    shared = false;
  }
  const filter = shared ? `$share/${options.sharedGroup}/${DEVICE_TOPICS}` : DEVICE_TOPICS;

  await subscribe(client, filter);
  ingestMetrics.connected.set(1);
  log.info(
    { protocolVersion: version, filter, clientId: options.clientId, sessionPresent: connack.sessionPresent },
    'ingest subscribed',
  );

  let closing = false;
  let givenUp = false;
  // Set while a connection is up: a failed connection attempt (broker down) is no short session.
  let connectedAt: number | null = Date.now();
  let shortSessions = 0;
  const giveUp = (error: SessionTakenOverError) => {
    if (givenUp || closing) return;
    givenUp = true;
    ingestMetrics.connected.set(0);
    // No reconnect: it would take the session back from the other process, which takes it again.
    client.end(true);
    options.onFatal(error);
  };

  // Later reconnects resume the session; subscribing again is harmless and covers a session the broker lost.
  client.on('connect', (again) => {
    connectedAt = Date.now();
    ingestMetrics.connected.set(1);
    log.info({ sessionPresent: again.sessionPresent }, 'MQTT reconnected');
    subscribe(client, filter).catch((error: unknown) => log.error({ err: error }, 'MQTT resubscribe failed'));
  });
  client.on('disconnect', (packet) => {
    if (packet.reasonCode === SESSION_TAKEN_OVER)
      giveUp(
        new SessionTakenOverError(options.clientId, 'the broker disconnected it with reason 0x8E, session taken over'),
      );
  });
  client.on('close', () => {
    ingestMetrics.connected.set(0);
    if (closing || givenUp) return;
    const lasted = connectedAt === null ? null : Date.now() - connectedAt;
    connectedAt = null;
    if (lasted !== null) {
      shortSessions = lasted < SHORT_SESSION_MS ? shortSessions + 1 : 0;
      if (shortSessions >= SHORT_SESSIONS_TO_STOP) {
        giveUp(
          new SessionTakenOverError(
            options.clientId,
            `the broker closed ${shortSessions} connections in a row within ${SHORT_SESSION_MS / 1000} s of accepting them, as it does when another client takes the session`,
          ),
        );
        return;
      }
    }
    // Unacknowledged messages come again on the next connection (as redeliveries).
    log.warn({ unacked: acks.unacked }, 'MQTT connection lost; reconnecting');
  });

  return {
    protocolVersion: version,
    filter,
    isConnected: () => client.connected,
    get unacked() {
      return acks.unacked;
    },
    pause: () => acks.pause(),
    flushAcks: () => acks.flush(),
    close: async () => {
      closing = true;
      // A clean DISCONNECT completes when the socket closes, which needs the broker's
      // side read to its end; should that not come, the connection is dropped instead.
      let timer: NodeJS.Timeout | undefined;
      const dropped = new Promise<void>((resolve) => {
        timer = setTimeout(() => client.end(true, () => resolve()), CLOSE_TIMEOUT_MS);
      });
      await Promise.race([client.endAsync(false), dropped]);
      clearTimeout(timer);
      ingestMetrics.connected.set(0);
    },
  };
}
