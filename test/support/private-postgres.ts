import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './broker.ts';

const run = promisify(execFile);

export interface PrivatePostgres {
  url: string;
  port: number;
  /** Its data directory (inside `dir`, the temporary directory holding everything). */
  dataDir: string;
  dir: string;
  /** Stops the server (fast shutdown: open connections are terminated). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  /** Stops it and removes its data directory. */
  destroy(): Promise<void>;
}

/** Where initdb and pg_ctl live: GANTRY_TEST_PG_BIN, the newest /usr/lib/postgresql/N/bin, or PATH. */
export function postgresBinDir(): string | null {
  if (process.env.GANTRY_TEST_PG_BIN) return process.env.GANTRY_TEST_PG_BIN;
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((name) => existsSync(path.join(root, name, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return path.join(root, versions[0], 'bin');
  }
  try {
    return path.dirname(execFileSync('which', ['initdb'], { encoding: 'utf8' }).trim());
  } catch {
    return null;
  }
}

const asRoot = () => process.getuid?.() === 0;

/**
 * Runs a program as the user PostgreSQL runs as: itself, or `postgres` when root (initdb
 * and postgres refuse root). A bare name is looked up in the PostgreSQL binaries first.
 */
export function runAsPostgres(program: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const bin = postgresBinDir();
  const file = bin && existsSync(path.join(bin, program)) ? path.join(bin, program) : program;
  return asRoot() ? run('runuser', ['-u', 'postgres', '--', file, ...args]) : run(file, args);
}

/** A new temporary directory the PostgreSQL user owns. */
export function postgresOwnedTempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  if (asRoot()) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  return dir;
}

/**
 * A throwaway PostgreSQL cluster of its own (temp directory, free port) for drills
 * that stop the database: the machine's shared server is never touched. `settings`
 * are appended to its postgresql.conf (archiving, for the restore drill).
 */
export async function startPrivatePostgres(settings: Record<string, string> = {}): Promise<PrivatePostgres> {
  if (!postgresBinDir()) throw new Error('no PostgreSQL binaries (initdb, pg_ctl) found; set GANTRY_TEST_PG_BIN');
  const dir = postgresOwnedTempDir('gantry-pg-');
  const data = path.join(dir, 'data');
  const tool = runAsPostgres;

  const port = await freePort();
  await tool('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync']);
  const lines = Object.entries(settings).map(([name, value]) => `${name} = '${value.replaceAll("'", "''")}'\n`);
  if (lines.length > 0) appendFileSync(path.join(data, 'postgresql.conf'), lines.join(''));
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=on -c max_connections=50`;
  const start = async () => {
    await tool('pg_ctl', ['-D', data, '-o', options, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', 'start']);
  };
  const stop = async () => {
    await tool('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).catch(() => undefined);
  };
  await start();
  const url = `postgresql://postgres@127.0.0.1:${port}/postgres`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('CREATE DATABASE gantry_outage_test');
  await client.end();
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/gantry_outage_test`,
    port,
    dataDir: data,
    dir,
    start,
    stop,
    async destroy() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
