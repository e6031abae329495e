import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { generate, parser as packetParser, type Packet } from 'mqtt-packet';
import { createPublisher, type Publisher } from './publisher.ts';

const protocol = { protocolVersion: 4 as const };

/**
 * Just enough of an MQTT 3.1.1 broker to watch the publisher: CONNACK, PUBACK (unless
 * told to hold them), a record of every PUBLISH, and an outage — every connection cut
 * and the port refusing — that ends on the same port.
 */
async function startFakeBroker() {
  const received: Array<{ payload: string; dup: boolean }> = [];
  const sockets = new Set<net.Socket>();
  let connects = 0;
  let acknowledge = true;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const parse = packetParser(protocol);
    parse.on('packet', (packet: Packet) => {
      if (packet.cmd === 'connect') {
        connects += 1;
        socket.write(generate({ cmd: 'connack', returnCode: 0, sessionPresent: false }, protocol));
      } else if (packet.cmd === 'publish') {
        received.push({ payload: packet.payload.toString(), dup: packet.dup });
        if (acknowledge && packet.qos === 1)
          socket.write(generate({ cmd: 'puback', messageId: packet.messageId! }, protocol));
      } else if (packet.cmd === 'pingreq') {
        socket.write(generate({ cmd: 'pingresp' }, protocol));
      }
    });
    socket.on('data', (chunk: Buffer) => parse.parse(chunk));
  });
  const listen = (port: number) => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  await listen(0);
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `mqtt://127.0.0.1:${port}`,
    received,
    connects: () => connects,
    holdAcknowledgements(hold: boolean) {
      acknowledge = !hold;
    },
    /** Cuts every connection and stops listening (connections are refused) until up(). */
    async down() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    up: () => listen(port),
    async close() {
      for (const socket of sockets) socket.destroy();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const until = async (what: string, done: () => boolean, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
};

let broker: Awaited<ReturnType<typeof startFakeBroker>> | undefined;
let publisher: Publisher | undefined;
afterEach(async () => {
  await publisher?.close();
  await broker?.close();
  publisher = undefined;
  broker = undefined;
});

describe('simulator publisher across a broker outage', () => {
  it('keeps reconnecting while the broker is down for longer than a second, then sends what was published meanwhile', async () => {
    broker = await startFakeBroker();
    publisher = await createPublisher({ mqttUrl: broker.url, window: 100 });
    for (let i = 0; i < 5; i += 1) await publisher.publish('gantry/v1/devices/d1/gps', `before-${i}`);
    await publisher.flush();

    await broker.down();
    // Published with no connection: they wait in the window.
    for (let i = 0; i < 10; i += 1) await publisher.publish('gantry/v1/devices/d1/gps', `during-${i}`);
    // Long enough for several refused attempts (250 ms, 500 ms, 1 s, …): the old code tried once.
    await sleep(2500);
    expect(publisher.stats.acked).toBe(5);
    await broker.up();

    await until('every message acknowledged', () => publisher!.stats.acked === 15);
    expect(publisher.stats).toEqual({ sent: 15, acked: 15, reconnects: 1, resent: 10 });
    const payloads = new Set(broker.received.map((message) => message.payload));
    for (let i = 0; i < 10; i += 1) expect(payloads.has(`during-${i}`)).toBe(true);
    expect(broker.connects()).toBe(2);
  });

  it('resends, marked DUP, what the dropped connection left unacknowledged, and a full window resumes after the reconnect', async () => {
    broker = await startFakeBroker();
    publisher = await createPublisher({ mqttUrl: broker.url, window: 4 });
    broker.holdAcknowledgements(true);
    for (let i = 0; i < 4; i += 1) await publisher.publish('gantry/v1/devices/d2/adcin', `unacked-${i}`);
    await until('four messages at the broker', () => broker!.received.length === 4);

    await broker.down();
    broker.holdAcknowledgements(false);
    // The window is full: this publish waits until the reconnect frees it.
    let fifthSent = false;
    const fifth = publisher.publish('gantry/v1/devices/d2/adcin', 'fifth').then(() => {
      fifthSent = true;
    });
    await sleep(600);
    expect(fifthSent).toBe(false);
    await broker.up();
    await fifth;
    await publisher.flush();

    expect(publisher.stats).toEqual({ sent: 5, acked: 5, reconnects: 1, resent: 4 });
    const resent = broker.received.slice(4);
    expect(resent.slice(0, 4)).toEqual([0, 1, 2, 3].map((i) => ({ payload: `unacked-${i}`, dup: true })));
    expect(resent.map((message) => message.payload)).toContain('fifth');
  });

  it('stops retrying on close() while the broker is down', async () => {
    broker = await startFakeBroker();
    publisher = await createPublisher({ mqttUrl: broker.url });
    await broker.down();
    await sleep(300);
    await publisher.close();
    await broker.up();
    await sleep(1500);
    expect(broker.connects()).toBe(1);
    await expect(publisher.publish('gantry/v1/devices/d3/gps', 'late')).rejects.toThrow('closed');
    publisher = undefined;
  });
});
