import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { choosePort } from './ports.ts';

const listeners: net.Server[] = [];

afterEach(async () => {
  await Promise.all(listeners.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Occupies a free loopback port, as a local Mosquitto holds 1883; resolves with it. */
async function occupiedPort(host = '127.0.0.1'): Promise<number> {
  const server = net.createServer();
  listeners.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as net.AddressInfo).port;
}

const request = { host: '127.0.0.1', listener: 'the embedded MQTT broker', remedy: 'set GANTRY_MQTT_PORT' };

describe('choosePort', () => {
  it('keeps a free port', async () => {
    const port = await occupiedPort();
    await new Promise((resolve) => listeners.pop()?.close(resolve));
    expect(await choosePort({ ...request, port, fixed: true })).toBe(port);
  });

  it('moves a taken default port to the next free one', async () => {
    const busy = await occupiedPort();
    const chosen = await choosePort({ ...request, port: busy, fixed: false });
    expect(chosen).toBeGreaterThan(busy);
    expect(chosen).toBeLessThanOrEqual(busy + 100);
    // The chosen port is really free: a server can listen there.
    const server = net.createServer();
    listeners.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(chosen, '127.0.0.1', resolve);
    });
  });

  it('sees a listener on all interfaces as taking the loopback port', async () => {
    const busy = await occupiedPort('0.0.0.0');
    expect(await choosePort({ ...request, port: busy, fixed: false })).not.toBe(busy);
  });

  it('refuses a taken port that was set, naming the port and the way out', async () => {
    const busy = await occupiedPort();
    await expect(choosePort({ ...request, port: busy, fixed: true })).rejects.toThrow(
      `port ${busy} is already in use, so the embedded MQTT broker cannot start there; set GANTRY_MQTT_PORT`,
    );
  });

  it('passes port 0 (any free port) through', async () => {
    expect(await choosePort({ ...request, port: 0, fixed: false })).toBe(0);
  });
});
