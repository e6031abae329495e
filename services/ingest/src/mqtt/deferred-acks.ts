import type { Duplex } from 'node:stream';
import type { MqttClient } from 'mqtt';
import type { IPublishPacket } from 'mqtt-packet';

/**
 * Acknowledging QoS 1 messages after their batch committed, without stalling the stream.
 *
 * mqtt.js hands incoming PUBLISH packets to `client.handleMessage(packet, callback)` one
 * at a time: it parses the next packet only after the callback ran, and sends the PUBACK
 * from inside it. Holding the callback until commit therefore means one message in
 * flight per connection. Instead the callback is called at once with an error
 * sentinel, which makes mqtt.js skip its PUBACK and move on (documented behaviour of
 * handleMessage; covered by mqtt.js' own tests); the PUBACKs are written here later,
 * in receive order (MQTT-4.6.0-2), several per socket write, and only on the network
 * connection the message arrived on — a packet id means nothing on a later
 * connection, where the broker redelivers instead.
 *
 * Flow control: the broker should stop at our Receive Maximum (MQTT 5; Mosquitto 2.0
 * does not always keep to it). Past `maxUnacked` messages of the current connection or
 * `maxUnackedBytes` in all the callback is
 * held, mqtt.js stops reading the socket and TCP back-pressure reaches the broker:
 * memory stays bounded. While held, control packets (PINGRESP) wait too, so the
 * limits sit above what a healthy pipeline reaches.
 */
const DEFERRED = new Error('PUBACK deferred until the batch is committed');

/**
 * PUBACKs for these packet ids in one buffer, byte for byte what mqtt-packet's generate
 * writes (MQTT 5: reason code 0 and an empty property list; 3.1.1: the id alone), without
 * a buffer and a generic encoder run per acknowledgement.
 */
export function encodePubacks(ids: readonly number[], protocolVersion: number): Buffer {
  const size = protocolVersion === 5 ? 6 : 4;
  const buffer = Buffer.alloc(size * ids.length);
  for (let index = 0; index < ids.length; index += 1) {
    const offset = index * size;
    buffer[offset] = 0x40;
    buffer[offset + 1] = size - 2;
    buffer.writeUInt16BE(ids[index]!, offset + 2);
  }
  return buffer;
}

interface Pending {
  messageId: number;
  stream: Duplex;
  bytes: number;
  done: boolean;
}

export interface DeferredAcks {
  /** Messages received and not yet acknowledged (or forgotten with their connection). */
  readonly unacked: number;
  /** Stops taking messages: later packets are neither processed nor acknowledged (the broker redelivers them). */
  pause(): void;
  /** Writes every PUBACK that is due now. */
  flush(): void;
}

export interface DeferredAckOptions {
  maxUnacked: number;
  /** Payload bytes held un-acknowledged before reading pauses (a Receive Maximum counts messages, not bytes). */
  maxUnackedBytes: number;
  /** A packet to process; call settle() once it is safely stored. */
  onPacket(packet: IPublishPacket, settle: () => void): void;
  onUnackedChange?(count: number): void;
  /**
   * Reading stops: the window is full. Nothing more arrives until a batch commits, so a
   * batch still open (waiting for its time) should close now.
   */
  onFull?(): void;
}

export function attachDeferredAcks(client: MqttClient, options: DeferredAckOptions): DeferredAcks {
  // A ring would save the occasional splice; the head index keeps shifting O(1).
  let pending: Pending[] = [];
  let head = 0;
  let stalled: (() => void) | null = null;
  let paused = false;
  let flushQueued = false;
  let unackedBytes = 0;
  // Per network connection: the count limit is about what the broker may send on this
  // one. Messages left by an earlier connection are still held (their batches commit,
  // the broker redelivers them) but no longer hold the new connection back — counting
  // them stalled it at once, tripped keepalive and repeated on every reconnect.
  const unackedByStream = new Map<Duplex, number>();

  const unacked = () => pending.length - head;
  const full = () =>
    (unackedByStream.get(client.stream as Duplex) ?? 0) >= options.maxUnacked ||
    unackedBytes >= options.maxUnackedBytes;
  const report = () => options.onUnackedChange?.(unacked());

  const release = () => {
    if (stalled !== null && !paused && !full()) {
      const resume = stalled;
      stalled = null;
      resume();
    }
  };

  const flush = () => {
    flushQueued = false;
    const ids: number[] = [];
    const current = client.stream as Duplex | undefined;
    const live = current !== undefined && client.connected && !current.destroyed && current.writable;
    const protocolVersion = client.options.protocolVersion ?? 4;
    while (head < pending.length && pending[head]!.done) {
      const entry = pending[head]!;
      head += 1;
      unackedBytes -= entry.bytes;
      const left = (unackedByStream.get(entry.stream) ?? 1) - 1;
      if (left > 0) unackedByStream.set(entry.stream, left);
      else unackedByStream.delete(entry.stream);
      if (live && entry.stream === current) ids.push(entry.messageId);
    }
    if (head > 4096 && head * 2 > pending.length) {
      pending = pending.slice(head);
      head = 0;
    }
    if (ids.length > 0) current!.write(encodePubacks(ids, protocolVersion));
    report();
    release();
  };

  const scheduleFlush = () => {
    if (flushQueued) return;
    flushQueued = true;
    queueMicrotask(flush);
  };

  client.handleMessage = (packet, callback) => {
    if (paused) {
      // Neither processed nor acknowledged: the session redelivers it after a restart.
      // Not held either: mqtt.js must keep reading so that the DISCONNECT of a stop can
      // complete (a held callback left end() waiting for ever).
      callback(DEFERRED);
      return;
    }
    const publish = packet as IPublishPacket;
    if (publish.qos === 0 || publish.messageId === undefined) {
      options.onPacket(publish, () => undefined);
      callback();
      return;
    }
    const bytes = publish.payload.length;
    const entry: Pending = { messageId: publish.messageId, stream: client.stream as Duplex, bytes, done: false };
    pending.push(entry);
    unackedBytes += bytes;
    unackedByStream.set(entry.stream, (unackedByStream.get(entry.stream) ?? 0) + 1);
    options.onPacket(publish, settlerOf(entry));
    report();
    if (full()) {
      stalled = holdOf(callback);
      options.onFull?.();
    } else callback(DEFERRED);
  };

  // Made outside handleMessage: a closure keeps its whole enclosing scope alive, and
  // handleMessage's holds mqtt.js' callback, whose scope holds the packet and its
  // payload. The settler lives until the batch commits, so it must capture the entry alone.
  function settlerOf(entry: Pending): () => void {
    return () => {
      entry.done = true;
      scheduleFlush();
    };
  }
  function holdOf(callback: (error?: Error) => void): () => void {
    return () => callback(DEFERRED);
  }

  // mqtt.js drops the old connection's packet pump on close; a held callback belongs to it.
  client.on('close', () => {
    if (stalled !== null && !paused) {
      const resume = stalled;
      stalled = null;
      resume();
    }
  });

  return {
    get unacked() {
      return unacked();
    },
    pause() {
      paused = true;
      const held = stalled;
      stalled = null;
      held?.();
    },
    flush,
  };
}
