import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './broker.ts';
import { postgresBinDir } from './private-postgres.ts';

const run = promisify(execFile);

/** One PostgreSQL server of a streaming pair, in a temp directory on a free port. */
export interface Cluster {
  port: number;
  /** Connection URL of a database on this server. */
  url(database: string): string;
  /** Starts the server (again) on the same port and data. */
  start(): Promise<void>;
  /** Immediate shutdown: like a crash, nothing waits for open connections. */
  stop(): Promise<void>;
  /** The postmaster's process id (from postmaster.pid), or null when it is down. */
  postmasterPid(): number | null;
}

export interface StreamingPair {
  primary: Cluster;
  /** A hot standby made by `pg_basebackup -R`, streaming from the primary. */
  replica: Cluster;
  /** Stops both servers and removes their data. */
  destroy(): Promise<void>;
}

/** The directory of pg_basebackup beside initdb, or null when this machine has none. */
export function basebackupBinDir(): string | null {
  const bin = postgresBinDir();
  return bin && existsSync(path.join(bin, 'pg_basebackup')) ? bin : null;
}

/**
 * A primary and a streaming hot standby of its own (never the machine's shared server).
 * `prepare` runs on the primary before the base backup (create and migrate a database),
 * so the standby starts with it. As root, the servers run as the `postgres` user.
 */
export async function startStreamingPair(
  prepare: (primary: Cluster) => Promise<void>,
  settings: string[] = [],
): Promise<StreamingPair> {
  const bin = basebackupBinDir();
  if (!bin) throw new Error('no pg_basebackup found beside initdb');
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gantry-pair-'));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const tool = (name: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', path.join(bin, name), ...args]) : run(path.join(bin, name), args);

  const started: Cluster[] = [];
  const cluster = async (name: string): Promise<Cluster> => {
    const data = path.join(dir, name);
    const port = await freePort();
    const options = [
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`,
      '-c wal_level=replica -c max_wal_senders=5 -c hot_standby=on -c hot_standby_feedback=on',
      ...settings.map((setting) => `-c ${setting}`),
    ].join(' ');
    const handle: Cluster = {
      port,
      url: (database) => `postgresql://postgres@127.0.0.1:${port}/${database}`,
      start: async () => {
        await tool('pg_ctl', [
          '-D',
          data,
          '-o',
          options,
          '-l',
          path.join(dir, `${name}.log`),
          '-w',
          '-t',
          '120',
          'start',
        ]);
      },
      stop: async () => {
        await tool('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      },
      postmasterPid: () => {
        try {
          return Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
        } catch {
          return null;
        }
      },
    };
    started.push(handle);
    return handle;
  };

  const destroy = async () => {
    await Promise.all(started.map((server) => server.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const primary = await cluster('primary');
    await tool('initdb', [
      '-D',
      path.join(dir, 'primary'),
      '-U',
      'postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    await primary.start();
    await prepare(primary);
    const replica = await cluster('replica');
    // -R writes standby.signal and primary_conninfo; -X stream copies the WAL made meanwhile.
    await tool('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-D',
      path.join(dir, 'replica'),
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ]);
    await replica.start();
    return { primary, replica, destroy };
  } catch (error) {
    await destroy();
    throw error;
  }
}
