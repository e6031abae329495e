import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './broker.ts';

/**
 * Gantry's services as real processes (their standalone entry points), for tests and
 * drills that kill, restart or multiply them. Each is the built JavaScript (dist/, as
 * deployed; the suite's global setup builds it) run by node itself, so a signal reaches
 * the real process.
 */
export type ServiceName = 'api' | 'ingest' | 'worker';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** The built entry point of a service (services/<name>/dist/main.js), absolute. */
export function builtEntry(service: ServiceName | 'cli' | 'simulator'): string {
  return path.join(repoRoot, 'services', service, 'dist', 'main.js');
}

/** node's arguments to run a built service: stack traces point at the TypeScript sources. */
export function nodeArguments(service: ServiceName | 'cli' | 'simulator', ...args: string[]): string[] {
  return ['--enable-source-maps', builtEntry(service), ...args];
}

/**
 * node's arguments to run a TypeScript script of test/ (a load generator, a stand-in
 * server) with tsx's loader, the workspace packages read from their sources.
 */
export function tsxArguments(script: string, ...args: string[]): string[] {
  return ['--conditions=gantry-source', '--import', 'tsx', script, ...args];
}

/** The variable naming the port each service serves /healthz (and /metrics) on. */
const healthPortVariable: Record<ServiceName, string> = {
  api: 'GANTRY_PORT',
  ingest: 'GANTRY_INGEST_METRICS_PORT',
  worker: 'GANTRY_WORKER_METRICS_PORT',
};

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServiceProcess {
  name: ServiceName;
  child: ChildProcess;
  pid: number;
  /** Base URL of its HTTP listener: the API itself, or the /healthz and /metrics server of ingest and worker. */
  url: string;
  exited: Promise<ProcessExit>;
  /** The last 8 KiB of its standard error. */
  stderr(): string;
  /** Resident set size in bytes, read from /proc (0 once it has exited). */
  rss(): number;
  /** Sends SIGTERM (or the given signal) and resolves with the exit. */
  stop(signal?: NodeJS.Signals): Promise<ProcessExit>;
  /** SIGKILL: no chance to flush, acknowledge or release anything. */
  kill(): Promise<ProcessExit>;
}

export interface SpawnServiceOptions {
  /** GANTRY_* variables (the database and broker URLs above all). */
  env: Record<string, string>;
  /** How long to wait for /healthz to answer 200 (default 60 s). */
  readyTimeoutMs?: number;
}

const running = new Set<ServiceProcess>();

/**
 * Starts a service with its standalone entry point and resolves once its /healthz
 * answers 200: the API is listening, ingest is connected to the broker, the worker
 * reached its database.
 */
export async function spawnService(name: ServiceName, options: SpawnServiceOptions): Promise<ServiceProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, nodeArguments(name), {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_HOST: '127.0.0.1',
      GANTRY_RUN_MIGRATIONS: 'false',
      ...options.env,
      [healthPortVariable[name]]: String(port),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8192);
  });
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = `http://127.0.0.1:${port}`;
  const service: ServiceProcess = {
    name,
    child,
    pid: child.pid!,
    url,
    exited,
    stderr: () => stderr,
    rss() {
      try {
        const line = readFileSync(`/proc/${child.pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
        return line ? Number(line[1]) * 1024 : 0;
      } catch {
        return 0;
      }
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const exit = await exited;
      running.delete(service);
      return exit;
    },
    kill() {
      return service.stop('SIGKILL');
    },
  };
  running.add(service);
  void exited.then(() => running.delete(service));

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited before it was ready: ${stderr}`);
    const status = await fetch(`${url}/healthz`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) return service;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `${name} was not ready within ${options.readyTimeoutMs ?? 60_000} ms (last /healthz ${status}): ${stderr}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** SIGKILLs every service process still running (afterAll, or a drill's clean-up). */
export async function killAllServices(): Promise<void> {
  await Promise.all([...running].map((service) => service.kill()));
}
