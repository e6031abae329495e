import net from 'node:net';
import tls from 'node:tls';
import { generate, parser as packetParser, type IPublishPacket, type Packet } from 'mqtt-packet';

/**
 * A lean MQTT 3.1.1 publisher for simulated devices: QoS 0/1 publishes pipelined over
 * one or more connections with a window of unacknowledged messages. It encodes with
 * mqtt-packet (what mqtt.js uses) straight onto the socket because the benchmark
 * shares two cores with the broker, PostgreSQL and ingest: a full client's per-message
 * bookkeeping would slow the machine it measures. MQTT 3.1.1 works with every broker
 * Gantry runs against (Mosquitto, the embedded aedes).
 */
export interface PublisherOptions {
  mqttUrl: string;
  /**
   * The nodes of a clustered broker, as a device given a list of URLs uses them:
   * connection i starts on node i mod n and, each time its connection drops, tries the
   * next one (resending what was not acknowledged there). Replaces mqttUrl.
   */
  mqttUrls?: string[];
  username?: string | undefined;
  password?: string | undefined;
  /** Parallel connections; a topic always uses the same one, so a device's messages stay in order. */
  connections?: number;
  /** Unacknowledged QoS 1 messages per connection before publish() waits. */
  window?: number;
  clientIdPrefix?: string;
  /** Reconnect (and resend what was not acknowledged) when a connection drops. */
  reconnect?: boolean;
}

export interface PublisherStats {
  sent: number;
  acked: number;
  /** Connections re-established after a drop (each resends the window); createPublisher always counts it. */
  reconnects?: number;
  /**
   * Messages written on a reconnect because no PUBACK had come for them: left by the
   * dropped connection, or published while there was none; createPublisher always counts it.
   */
  resent?: number;
}

export interface Publisher {
  /**
   * Sends one message; resolves once it is on its way (at once, unless the window of
   * unacknowledged messages is full). flush() waits for the acknowledgements.
   */
  publish(topic: string, payload: string | Buffer, qos?: 0 | 1): Promise<void>;
  /** Resolves once everything sent so far is acknowledged. */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly stats: PublisherStats;
}

const protocol = { protocolVersion: 4 as const };

/** Reconnect backoff after a dropped connection: 250 ms, doubling, at most 5 s, until close(). */
const RECONNECT_FIRST_MS = 250;
const RECONNECT_MAX_MS = 5_000;

class Connection {
  private socket: net.Socket | null = null;
  /** CONNACK received on the current socket: only then are packets written. */
  private connected = false;
  private everConnected = false;
  private nextId = 0;
  /** Un-acknowledged QoS 1 messages in publish order (Map keeps insertion order); resent after every reconnect. */
  private readonly inflight = new Map<number, IPublishPacket>();
  private readonly waiting: Array<() => void> = [];
  private readonly drained: Array<() => void> = [];
  private closing = false;
  private ping: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private reconnectAttempts = 0;
  private corked: Buffer[] = [];
  private corkQueued = false;
  private urlIndex: number;

  constructor(
    private readonly options: PublisherOptions & { clientId: string },
    private readonly window: number,
    private readonly stats: PublisherStats,
    firstUrl = 0,
  ) {
    this.urlIndex = firstUrl;
  }

  private url(): URL {
    const urls = this.options.mqttUrls ?? [this.options.mqttUrl];
    return new URL(urls[this.urlIndex % urls.length]!);
  }

  /**
   * Opens a connection. The first one rejects when the broker cannot be reached or
   * refuses (createPublisher fails fast); once connected, every lost connection is
   * retried with a capped backoff until close(), and what was published meanwhile
   * waits in the window and goes out after the CONNACK.
   */
  connect(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const url = this.url();
      const port = Number(url.port || (url.protocol === 'mqtts:' ? 8883 : 1883));
      const host = url.hostname;
      const socket =
        url.protocol === 'mqtts:' ? tls.connect({ port, host, servername: host }) : net.connect({ port, host });
      socket.setNoDelay(true);
      const parse = packetParser(protocol);
      let acknowledged = false;
      parse.on('packet', (packet: Packet) => {
        if (packet.cmd === 'connack') {
          if (packet.returnCode) {
            reject(new Error(`the broker refused the simulator connection (code ${packet.returnCode})`));
            socket.destroy();
            return;
          }
          acknowledged = true;
          this.connected = true;
          if (this.everConnected) this.stats.reconnects = (this.stats.reconnects ?? 0) + 1;
          this.everConnected = true;
          this.reconnectAttempts = 0;
          // Resend, in publish order, whatever is unacknowledged: left by the previous
          // connection, or published while there was none.
          for (const inflight of this.inflight.values()) this.write(generate({ ...inflight, dup: true }, protocol));
          this.stats.resent = (this.stats.resent ?? 0) + this.inflight.size;
          this.ping = setInterval(() => this.write(generate({ cmd: 'pingreq' }, protocol)), 30_000);
          this.ping.unref();
          resolve();
        } else if (packet.cmd === 'puback') {
          if (!this.inflight.delete(packet.messageId!)) return;
          this.stats.acked += 1;
          // Refill in bulk once half the window is free: one write per refill, not one per acknowledgement.
          if (this.inflight.size <= this.window / 2) for (const wake of this.waiting.splice(0)) wake();
          if (this.inflight.size === 0) for (const wake of this.drained.splice(0)) wake();
        }
      });
      parse.on('error', (error: Error) => socket.destroy(error));
      socket.on('data', (chunk: Buffer) => parse.parse(chunk));
      socket.on('error', (error) => {
        if (!acknowledged) reject(error);
      });
      socket.on('close', () => {
        if (this.socket !== socket) return;
        if (this.ping) clearInterval(this.ping);
        this.ping = null;
        this.socket = null;
        this.connected = false;
        // Writes queued for this socket are dropped: their messages are still in the window.
        this.corked = [];
        if (!acknowledged) reject(new Error('the connection to the broker closed before its CONNACK'));
        // With several nodes the next attempt goes to the next one: the node may be dead.
        this.urlIndex += 1;
        if (this.everConnected) this.scheduleReconnect();
      });
      socket.on('connect', () => {
        socket.write(
          generate(
            {
              cmd: 'connect',
              protocolId: 'MQTT',
              protocolVersion: 4,
              clean: true,
              clientId: this.options.clientId,
              keepalive: 60,
              ...(this.options.username ? { username: this.options.username } : {}),
              ...(this.options.password ? { password: Buffer.from(this.options.password) } : {}),
            },
            protocol,
          ),
        );
      });
      this.socket = socket;
    });
  }

  private scheduleReconnect(): void {
    if (this.closing || this.options.reconnect === false || this.reconnectTimer) return;
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_FIRST_MS * 2 ** this.reconnectAttempts);
    this.reconnectAttempts += 1;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      // A failed attempt closes its socket, and the close schedules the next one.
      if (!this.closing) this.connect().catch(() => undefined);
    }, delay);
  }

  /** Coalesces the writes of one tick into one socket write; nothing is written without a CONNACK. */
  private write(buffer: Buffer): void {
    if (!this.connected) return;
    this.corked.push(buffer);
    if (this.corkQueued) return;
    this.corkQueued = true;
    setImmediate(() => {
      this.corkQueued = false;
      const buffers = this.corked;
      this.corked = [];
      if (this.connected && this.socket && !this.socket.destroyed && buffers.length > 0) {
        this.socket.write(buffers.length === 1 ? buffers[0]! : Buffer.concat(buffers));
      }
    });
  }

  /**
   * QoS 1: the message joins the window (waiting while it is full) and is written at
   * once when connected, else after the next CONNACK. QoS 0 without a connection is
   * dropped, as QoS 0 allows.
   */
  async publish(topic: string, payload: string | Buffer, qos: 0 | 1): Promise<void> {
    if (this.closing) throw new Error('the publisher is closed');
    if (qos === 0) {
      this.write(generate({ cmd: 'publish', topic, payload, qos: 0, retain: false, dup: false }, protocol));
      this.stats.sent += 1;
      this.stats.acked += 1;
      return;
    }
    while (this.inflight.size >= this.window) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
      if (this.closing) throw new Error('the publisher is closed');
    }
    do this.nextId = this.nextId === 65535 ? 1 : this.nextId + 1;
    while (this.inflight.has(this.nextId));
    const packet: IPublishPacket = {
      cmd: 'publish',
      topic,
      payload,
      qos: 1,
      messageId: this.nextId,
      retain: false,
      dup: false,
    };
    this.inflight.set(packet.messageId!, packet);
    this.stats.sent += 1;
    this.write(generate(packet, protocol));
  }

  flush(): Promise<void> {
    if (this.inflight.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.drained.push(resolve));
  }

  close(): Promise<void> {
    this.closing = true;
    if (this.ping) clearInterval(this.ping);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    // Publishers waiting for room in the window give up (publish() throws).
    for (const wake of this.waiting.splice(0)) wake();
    const socket = this.socket;
    if (!socket || socket.destroyed) return Promise.resolve();
    if (!this.connected) {
      socket.destroy();
      return Promise.resolve();
    }
    const pending = this.corked.splice(0);
    if (pending.length > 0) socket.write(Buffer.concat(pending));
    return new Promise<void>((resolve) => {
      socket.once('close', () => resolve());
      socket.end(generate({ cmd: 'disconnect' }, protocol));
    });
  }
}

function topicHash(topic: string): number {
  let hash = 0;
  for (let index = 0; index < topic.length; index += 1) hash = (hash * 31 + topic.charCodeAt(index)) | 0;
  return Math.abs(hash);
}

export async function createPublisher(options: PublisherOptions): Promise<Publisher> {
  const count = Math.max(1, options.connections ?? 1);
  const window = Math.max(1, options.window ?? 1000);
  const stats: PublisherStats = { sent: 0, acked: 0, reconnects: 0, resent: 0 };
  const prefix = options.clientIdPrefix ?? `gantry-sim-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const connections = Array.from(
    { length: count },
    (_, index) => new Connection({ ...options, clientId: `${prefix}-${index}` }, window, stats, index),
  );
  await Promise.all(connections.map((connection) => connection.connect()));
  return {
    stats,
    publish(topic, payload, qos = 1) {
      const connection = count === 1 ? connections[0]! : connections[topicHash(topic) % count]!;
      return connection.publish(topic, payload, qos);
    },
    async flush() {
      await Promise.all(connections.map((connection) => connection.flush()));
    },
    async close() {
      await Promise.all(connections.map((connection) => connection.close()));
    },
  };
}
