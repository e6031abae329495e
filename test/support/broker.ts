import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface TestBroker {
  url: string;
  port: number;
  dataDir: string;
  /** Stops the broker (SIGTERM; it saves its persistent sessions). */
  stop(): Promise<void>;
  /** Kills and starts it again on the same port and data, as a broker restart drill. */
  restart(): Promise<void>;
}

const projectConfig = new URL('../../deploy/mosquitto/mosquitto.conf', import.meta.url);

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        if (Date.now() > deadline) reject(new Error(`mosquitto did not listen on ${port}`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

function mosquittoUser(): { uid: number; gid: number } | null {
  try {
    const uid = Number(
      execFileSync('id', ['-u', 'mosquitto'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(),
    );
    const gid = Number(
      execFileSync('id', ['-g', 'mosquitto'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(),
    );
    return { uid, gid };
  } catch {
    return null;
  }
}

/** Starts a Mosquitto with the project's config (deploy/mosquitto) on a free port. */
export async function startTestBroker(): Promise<TestBroker> {
  const port = await freePort();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-mosquitto-'));
  // Started as root, Mosquitto drops to its own user: it must be able to write its
  // persistence (sessions across a restart) and log there.
  const owner = process.getuid?.() === 0 ? mosquittoUser() : null;
  if (owner) chownSync(dataDir, owner.uid, owner.gid);
  const settings = readFileSync(projectConfig, 'utf8')
    .split('\n')
    .filter((line) => !/^\s*(listener|persistence_location|log_dest)\b/.test(line))
    .join('\n');
  const configFile = path.join(dataDir, 'mosquitto.conf');
  writeFileSync(
    configFile,
    `${settings}\nlistener ${port} 127.0.0.1\npersistence_location ${dataDir}/\nlog_dest file ${dataDir}/mosquitto.log\n`,
  );
  let child: ChildProcess;
  const launch = async () => {
    child = spawn(process.env.GANTRY_TEST_MOSQUITTO ?? 'mosquitto', ['-c', configFile], { stdio: 'ignore' });
    child.once('error', () => undefined);
    await waitForPort(port);
  };
  const stopChild = (signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill(signal);
    });
  await launch();
  return {
    url: `mqtt://127.0.0.1:${port}`,
    port,
    dataDir,
    async stop() {
      await stopChild('SIGTERM');
      rmSync(dataDir, { recursive: true, force: true });
    },
    async restart() {
      await stopChild('SIGTERM');
      await launch();
    },
  };
}
