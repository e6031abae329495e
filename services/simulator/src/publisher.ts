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

class Connection {
  private socket: net.Socket | null = null;
  private nextId = 0;
  private readonly inflight = new Map<number, IPublishPacket>();
  private readonly waiting: Array<() => void> = [];
  private readonly drained: Array<() => void> = [];
  private closing = false;
  private ping: NodeJS.Timeout | null = null;
  private ready: Promise<void> = Promise.resolve();
  private corked: Buffer[] = [];
  private corkQueued = false;

  constructor(
    private readonly options: PublisherOptions & { clientId: string },
    private readonly window: number,
    private readonly stats: PublisherStats,
  ) {}

  connect(): Promise<void> {
    this.ready = new Promise<void>((resolve, reject) => {
      const url = new URL(this.options.mqttUrl);
      const port = Number(url.port || (url.protocol === 'mqtts:' ? 8883 : 1883));
      const host = url.hostname;
      const socket = url.protocol === 'mqtts:' ? tls.connect({ port, host, servername: host }) : net.connect({ port, host });
      socket.setNoDelay(true);
      const parse = packetParser(protocol);
      let connected = false;
      parse.on('packet', (packet: Packet) => {
        if (packet.cmd === 'connack') {
          if (packet.returnCode) {
            reject(new Error(`the broker refused the simulator connection (code ${packet.returnCode})`));
            socket.destroy();
            return;
          }
          connected = true;
          // Resend whatever the previous connection left unacknowledged.
          for (const packet of this.inflight.values()) this.write(generate({ ...packet, dup: true }, protocol));
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
        if (!connected) reject(error);
      });
      socket.on('close', () => {
        if (this.ping) clearInterval(this.ping);
        this.socket = null;
        if (!this.closing && connected && this.options.reconnect !== false) {
          setTimeout(() => this.connect().catch(() => undefined), 1000);
        }
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
      this.ping = setInterval(() => this.write(generate({ cmd: 'pingreq' }, protocol)), 30_000);
      this.ping.unref();
    });
    return this.ready;
  }

  /** Coalesces the writes of one tick into one socket write. */
  private write(buffer: Buffer): void {
    this.corked.push(buffer);
    if (this.corkQueued) return;
    this.corkQueued = true;
    setImmediate(() => {
      this.corkQueued = false;
      const buffers = this.corked;
      this.corked = [];
      if (this.socket && !this.socket.destroyed && buffers.length > 0) {
        this.socket.write(buffers.length === 1 ? buffers[0]! : Buffer.concat(buffers));
      }
    });
  }

  async publish(topic: string, payload: string | Buffer, qos: 0 | 1): Promise<void> {
    await this.ready;
    if (qos === 0) {
      this.write(generate({ cmd: 'publish', topic, payload, qos: 0, retain: false, dup: false }, protocol));
      this.stats.sent += 1;
      this.stats.acked += 1;
      return;
    }
    while (this.inflight.size >= this.window) await new Promise<void>((resolve) => this.waiting.push(resolve));
    do this.nextId = this.nextId === 65535 ? 1 : this.nextId + 1;
    while (this.inflight.has(this.nextId));
    const packet: IPublishPacket = { cmd: 'publish', topic, payload, qos: 1, messageId: this.nextId, retain: false, dup: false };
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
    const socket = this.socket;
    if (!socket || socket.destroyed) return Promise.resolve();
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
  const stats: PublisherStats = { sent: 0, acked: 0 };
  const prefix = options.clientIdPrefix ?? `gantry-sim-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const connections = Array.from({ length: count }, (_, index) => new Connection({ ...options, clientId: `${prefix}-${index}` }, window, stats));
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
