import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { tsxArguments } from '../support/processes.ts';

/** The API alone in a child process (api-server.ts), with what a benchmark reads of it. */
export interface ApiProcess {
  url: string;
  child: ChildProcess;
  /** Resident memory now, kB. */
  rssKb(): number;
  /** Peak resident memory since start (VmHWM), kB. */
  peakKb(): number;
  /** CPU seconds the process has used (all its threads: deflate, GC, …). */
  cpuSeconds(): number;
}

const CLOCK_TICKS = 100;

function cpuSeconds(pid: number): number {
  // utime and stime, fields 14 and 15 of /proc/pid/stat (after the parenthesised name).
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : 0;
}

/**
 * Starts the API on the database, rate limits raised (a benchmark measures the endpoints,
 * not the limiter's refusals), and waits for the line with its URL. `env` adds settings.
 */
export async function startBenchApi(databaseUrl: string, env: Record<string, string> = {}): Promise<ApiProcess> {
  const child = spawn(process.execPath, tsxArguments(new URL('./api-server.ts', import.meta.url).pathname), {
    env: {
      ...process.env,
      GANTRY_DATABASE_URL: databaseUrl,
      GANTRY_LOG_LEVEL: 'silent',
      GANTRY_RATE_LIMIT_PER_SECOND: '1000000',
      GANTRY_RATE_LIMIT_BURST: '1000000',
      GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE: '100000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the API process exited (${code})`)));
  });
  const pid = child.pid!;
  return {
    url: (JSON.parse(line) as { url: string }).url,
    child,
    rssKb: () => procStatus(pid, 'VmRSS'),
    peakKb: () => procStatus(pid, 'VmHWM'),
    cpuSeconds: () => cpuSeconds(pid),
  };
}
