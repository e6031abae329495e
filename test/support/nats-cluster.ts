import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createPublisher } from '@gantry/simulator';
import { freePort } from './broker.ts';

/** The node configuration shipped for deployments, filled in through its environment variables. */
const nodeConfig = fileURLToPath(new URL('../../deploy/nats/node.conf', import.meta.url));

/** The nats-server binary (Debian installs it in /usr/sbin), or null when it is not installed. */
export function natsServerPath(): string | null {
  for (const candidate of ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server']) {
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not there
    }
  }
  try {
    return execFileSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

export interface NatsNode {
  name: string;
  clientPort: number;
  mqttPort: number;
  /** nats://127.0.0.1:<client port> */
  natsUrl: string;
  /** mqtt://127.0.0.1:<mqtt port> */
  mqttUrl: string;
  running(): boolean;
  pid(): number | null;
}

export interface NatsCluster {
  nodes: NatsNode[];
  natsUrls: string[];
  mqttUrls: string[];
  dataDir: string;
  /** SIGKILL: the node's process dies with whatever it held. */
  kill(index: number): Promise<void>;
  /** Starts a killed node again on its ports and store. */
  start(index: number): Promise<void>;
  /** Kills every node and removes their stores. */
  stop(): Promise<void>;
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Waits until the node's MQTT gateway accepts a connection: it needs the JetStream cluster
 * up (a meta leader, then its session and message streams), which takes seconds after
 * the processes listen; before that a CONNECT is closed unanswered.
 */
async function waitForMqtt(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      // Not mqtt.js: without reconnects its connectAsync never settles when the CONNECT goes unanswered.
      const probe = await createPublisher({ mqttUrl: url, reconnect: false });
      await probe.close();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`the MQTT gateway at ${url} did not accept a connection: ${error}`);
      await sleep(500);
    }
  }
}

/**
 * Starts `size` nats-server nodes on free loopback ports, clustered through routes, each
 * with JetStream (its own store under one temporary directory) and the MQTT gateway, from
 * deploy/nats/node.conf. Resolves once every node's MQTT gateway accepts devices.
 */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const binary = natsServerPath();
  if (!binary) throw new Error('nats-server is not installed');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-nats-'));
  const ports: Array<{ client: number; cluster: number; mqtt: number }> = [];
  for (let index = 0; index < size; index += 1)
    ports.push({ client: await freePort(), cluster: await freePort(), mqtt: await freePort() });
  const routes = `[${ports.map((port) => `nats-route://127.0.0.1:${port.cluster}`).join(', ')}]`;
  const children: Array<ChildProcess | null> = ports.map(() => null);
  // Whatever ends this process (a hook timeout, Ctrl-C), no node outlives it.
  const killOnExit = () => {
    for (const child of children) child?.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  const launch = async (index: number) => {
    const port = ports[index]!;
    const store = path.join(dataDir, `n${index + 1}`);
    mkdirSync(store, { recursive: true });
    const child = spawn(binary, ['-c', nodeConfig, '-l', path.join(store, 'server.log')], {
      env: {
        PATH: process.env.PATH,
        GANTRY_NATS_NODE: `n${index + 1}`,
        GANTRY_NATS_HOST: '127.0.0.1',
        GANTRY_NATS_PORT: String(port.client),
        GANTRY_NATS_CLUSTER_PORT: String(port.cluster),
        GANTRY_NATS_MQTT_PORT: String(port.mqtt),
        GANTRY_NATS_STORE: store,
        GANTRY_NATS_ROUTES: routes,
      },
      stdio: 'ignore',
    });
    children[index] = child;
    const deadline = Date.now() + 30_000;
    while (!((await listening(port.client)) && (await listening(port.mqtt)))) {
      if (child.exitCode !== null)
        throw new Error(`nats-server n${index + 1} exited (${child.exitCode}); see ${store}`);
      if (Date.now() > deadline) throw new Error(`nats-server n${index + 1} did not listen within 30 s`);
      await sleep(100);
    }
  };
  const kill = async (index: number) => {
    const child = children[index];
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };
  const stop = async () => {
    process.off('exit', killOnExit);
    await Promise.all(ports.map((_, index) => kill(index)));
    rmSync(dataDir, { recursive: true, force: true });
  };

  try {
    await Promise.all(ports.map((_, index) => launch(index)));
    for (const port of ports) await waitForMqtt(`mqtt://127.0.0.1:${port.mqtt}`, 90_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const nodes = ports.map((port, index) => ({
    name: `n${index + 1}`,
    clientPort: port.client,
    mqttPort: port.mqtt,
    natsUrl: `nats://127.0.0.1:${port.client}`,
    mqttUrl: `mqtt://127.0.0.1:${port.mqtt}`,
    running: () => {
      const child = children[index];
      return !!child && child.exitCode === null && child.signalCode === null;
    },
    pid: () => children[index]?.pid ?? null,
  }));
  return {
    nodes,
    natsUrls: nodes.map((node) => node.natsUrl),
    mqttUrls: nodes.map((node) => node.mqttUrl),
    dataDir,
    kill,
    start: launch,
    stop,
  };
}
