import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@gantry/config';
import { silentLogger } from '@gantry/logger';
import { createStopper, startGantry as startInProcess } from '../../services/cli/src/commands/start.ts';
import { statusCommand } from '../../services/cli/src/commands/status.ts';
import { freePort } from '../support/broker.ts';
import { nodeArguments } from '../support/processes.ts';

const root = path.resolve(new URL('../..', import.meta.url).pathname);
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs `gantry start` with no database or broker configured; resolves with its printed lines. */
function startGantry(env: Record<string, string>): {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
} {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-zero-'));
  chmodSync(dataDir, 0o755);
  dirs.push(dataDir);
  const child = spawn(process.execPath, nodeArguments('cli', 'start'), {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? os.tmpdir(),
      GANTRY_DATA_DIR: dataDir,
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_DEMO_SIMULATOR: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += String(chunk)));
  child.stderr!.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe('zero-configuration start (embedded PostgreSQL and MQTT broker)', () => {
  it('starts, provisions the demo, and serves over HTTP a reading published over MQTT', async () => {
    const [httpPort, mqttPort, pgPort] = [await freePort(), await freePort(), await freePort()];
    const gantry = startGantry({
      GANTRY_PORT: String(httpPort),
      GANTRY_MQTT_PORT: String(mqttPort),
      GANTRY_EMBEDDED_PG_PORT: String(pgPort),
    });
    const tenantKey = await waitFor(
      'the printed demo key',
      () =>
        /Demo tenant key:\s+(gk_\S+)/.exec(gantry.output())?.[1] ??
        (gantry.child.exitCode !== null ? 'exited' : undefined),
      150_000,
    );
    expect(tenantKey, gantry.output()).toMatch(/^gk_/);
    expect(gantry.output()).toContain('postgres mode');
    expect(gantry.output()).toContain(`http://localhost:${httpPort}/api/external/v1`);

    const base = `http://127.0.0.1:${httpPort}/api/external/v1`;
    const me = await fetch(`${base}/me`, { headers: { 'X-API-Key': tenantKey } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ tenant: { name: 'Gantry Demo Terminal' }, version: 'v1' });

    const ts = new Date(Date.now() - 1000).toISOString();
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { clientId: 'zero-config-test' });
    await client.publishAsync(
      'gantry/v1/devices/demo-sc-01/gps',
      JSON.stringify({ ts, lat: 51.9501, lon: 4.0512, speedKmh: 7 }),
      { qos: 1 },
    );
    await client.endAsync();

    const device = await waitFor(
      'the reading to show on /telemetry/devices',
      async () => {
        const response = await fetch(`${base}/telemetry/devices?q=demo-sc-01`, { headers: { 'X-API-Key': tenantKey } });
        const body = (await response.json()) as {
          items: Array<{ deviceId: string; latitude: number | null; lastMessageAt: string | null }>;
        };
        const found = body.items.find((item) => item.deviceId === 'demo-sc-01');
        return found?.latitude != null ? found : undefined;
      },
      60_000,
    );
    expect(device).toMatchObject({
      deviceId: 'demo-sc-01',
      latitude: 51.9501,
      longitude: 4.0512,
      lastMessageAt: ts.replace(/(\.\d{3})?Z$/, (m) => (m.length > 1 ? m : '.000Z')),
    });

    gantry.child.kill('SIGINT');
    expect(await gantry.exited).toBe(0);
    // Under a loaded machine the first start (initdb, migrations, demo) takes well over a minute.
  }, 300_000);

  it('refuses GANTRY_STORAGE_MODE=timescaledb on the embedded PostgreSQL, naming the reason', async () => {
    const gantry = startGantry({
      GANTRY_PORT: String(await freePort()),
      GANTRY_MQTT_PORT: String(await freePort()),
      GANTRY_EMBEDDED_PG_PORT: String(await freePort()),
      GANTRY_STORAGE_MODE: 'timescaledb',
    });
    const code = await gantry.exited;
    expect(code).not.toBe(0);
    expect(gantry.output()).toMatch(/GANTRY_STORAGE_MODE=timescaledb, but the timescaledb extension is not installed/);
  });

  it('stops at once with a message when the MQTT port is taken', async () => {
    const busy = await freePort();
    const blocker = net.createServer().listen(busy, '127.0.0.1');
    try {
      const gantry = startGantry({
        GANTRY_PORT: String(await freePort()),
        GANTRY_MQTT_PORT: String(busy),
        GANTRY_EMBEDDED_PG_PORT: String(await freePort()),
      });
      expect(await gantry.exited).not.toBe(0);
      expect(gantry.output()).toContain(`port ${busy} is already in use`);
      expect(gantry.output()).toContain('GANTRY_MQTT_PORT');
    } finally {
      blocker.close();
    }
  });
});

/** A listener on a free loopback port, standing for the program that holds a default port. */
async function occupy(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('default ports that are taken', () => {
  it('stops with a message naming GANTRY_EMBEDDED_PG_PORT when that port was set and is taken', async () => {
    const blocker = await occupy();
    try {
      const gantry = startGantry({
        GANTRY_PORT: String(await freePort()),
        GANTRY_MQTT_PORT: String(await freePort()),
        GANTRY_EMBEDDED_PG_PORT: String(blocker.port),
      });
      expect(await gantry.exited).not.toBe(0);
      expect(gantry.output()).toContain(`port ${blocker.port} is already in use`);
      expect(gantry.output()).toContain('GANTRY_EMBEDDED_PG_PORT');
    } finally {
      await blocker.close();
    }
  });

  it('moves each default port that is taken to the next free one, prints it and records it in running.json', async () => {
    // In process, with the defaults standing on private ports that a listener holds (the
    // real defaults, 1883, 8080 and 54329, belong to the machine's own services).
    const blockers = [await occupy(), await occupy(), await occupy()];
    const [mqttBlocker, apiBlocker, pgBlocker] = blockers as [
      (typeof blockers)[0],
      (typeof blockers)[0],
      (typeof blockers)[0],
    ];
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-ports-'));
    chmodSync(dataDir, 0o755);
    dirs.push(dataDir);
    const base = loadConfig({ GANTRY_DATA_DIR: dataDir, GANTRY_DEMO_SIMULATOR: 'false', GANTRY_HOST: '127.0.0.1' });
    expect(base.fixedPorts).toEqual({ http: false, mqtt: false, embeddedPostgres: false });
    const config = {
      ...base,
      embeddedPostgresPort: pgBlocker.port,
      mqtt: { ...base.mqtt, embeddedPort: mqttBlocker.port },
      http: { ...base.http, port: apiBlocker.port },
    };
    const lines: string[] = [];
    const context = { config, logger: silentLogger(), print: (line: string) => lines.push(line) };
    const stopper = createStopper(context);
    try {
      await startInProcess(context, stopper);
      const output = lines.join('\n');
      const running = JSON.parse(readFileSync(path.join(dataDir, 'running.json'), 'utf8')) as {
        pid: number;
        ports: { api: number; mqtt: number; postgres: number };
      };
      expect(running.pid).toBe(process.pid);
      const { api, mqtt: mqttPort, postgres } = running.ports;
      for (const [used, blocker] of [
        [api, apiBlocker],
        [mqttPort, mqttBlocker],
        [postgres, pgBlocker],
      ] as const) {
        expect(used).toBeGreaterThan(blocker.port);
        expect(output).toContain(`${blocker.port} is taken`);
      }
      expect(output).toContain(`so the MQTT broker listens on ${mqttPort} (GANTRY_MQTT_PORT sets the port)`);
      expect(output).toContain(`so the API listens on ${api} (GANTRY_PORT sets the port)`);
      expect(output).toContain(
        `so the embedded PostgreSQL listens on ${postgres} (GANTRY_EMBEDDED_PG_PORT sets the port)`,
      );
      expect(output).toContain(`API:       http://localhost:${api}/api/external/v1`);
      expect(output).toContain(`MQTT:      mqtt://127.0.0.1:${mqttPort}`);
      expect(output).toContain(`@127.0.0.1:${postgres}/gantry`);

      // The moved ports answer: the API, the broker, and the CLI finds the database.
      expect((await fetch(`http://127.0.0.1:${api}/healthz`)).status).toBe(200);
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { clientId: 'moved-port-test' });
      await client.endAsync();
      const status: string[] = [];
      await statusCommand.run([], { ...context, print: (line) => status.push(line) });
      expect(status.join('\n')).toContain(
        `running (pid ${process.pid}): API on ${api}, MQTT on ${mqttPort}, embedded PostgreSQL on ${postgres}`,
      );
      expect(status.join('\n')).toContain('storage mode:     postgres');
    } finally {
      await stopper.stopAll();
      await Promise.all(blockers.map((blocker) => blocker.close()));
    }
    expect(existsSync(path.join(dataDir, 'running.json'))).toBe(false);
  }, 300_000);
});
