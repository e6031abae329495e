import { readdirSync, readFileSync } from 'node:fs';
import type { Pool } from '@gantry/db';

/**
 * Where the soak's CPU and database time went, for a verdict that names the resource
 * that stopped it: CPU seconds per process (the services, this script, the broker and
 * PostgreSQL, read from /proc) and database time by statement, sampled from
 * pg_stat_activity (pg_stat_statements needs shared_preload_libraries, which a shared
 * server may not have). Statements are named by the tag of their leading comment (`ingest:…`,
 * `worker:…`, `api:…`); one without is named by its first words.
 */

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on every Linux build). */
const TICKS_PER_SECOND = 100;

/** utime + stime of a process in seconds, or null once it has gone. */
function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces: the fields after it start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

function processName(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return null;
  }
}

function pidsNamed(names: Set<string>): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (Number.isInteger(pid) && names.has(processName(pid) ?? '')) pids.push(pid);
  }
  return pids;
}

export interface StatementTime {
  statement: string;
  /** Sampled seconds a backend of the soak's database spent running it. */
  seconds: number;
  /** Share of all sampled active time, in %. */
  share: number;
  /** The wait events seen most while it ran ("CPU" when none), with their share of its samples. */
  waits: string;
}

export interface ResourceReport {
  wallSeconds: number;
  /** CPU seconds by process group, highest first; `cores` = seconds / wall seconds. */
  cpu: Array<{ name: string; seconds: number; cores: number }>;
  statements: StatementTime[];
  samples: number;
}

export interface ResourceMeter {
  stop(): Promise<ResourceReport>;
}

/** The statement a query text belongs to: the tag of its leading comment (`ingest:…`) or its first words. */
export function statementName(query: string): string {
  const tagged = /^\s*\/\*\s*([\w:.-]+)/.exec(query);
  if (tagged) return tagged[1]!;
  return query.replace(/\s+/g, ' ').trim().slice(0, 48) || '(empty)';
}

/**
 * Starts sampling. `processes` are this soak's service processes by name; PostgreSQL is
 * split into the backends of `database` and the rest of the server (WAL writer,
 * checkpointer, autovacuum, other databases' sessions), the broker counted when it is a
 * `mosquitto` process of this machine.
 */
export function startResourceMeter(options: {
  pool: Pool;
  database: string;
  processes: Record<string, number>;
  sampleMs?: number;
}): ResourceMeter {
  const sampleMs = options.sampleMs ?? 250;
  const startedAt = performance.now();
  const scriptStart = process.cpuUsage();
  /** pid → [group, cpu seconds when first seen, cpu seconds when last seen]. */
  const seen = new Map<number, { group: string; first: number; last: number }>();
  const databasePids = new Set<number>();
  const statementSamples = new Map<string, Map<string, number>>();
  let samples = 0;
  let stopped = false;

  const observe = (pid: number, group: string) => {
    const seconds = cpuSeconds(pid);
    if (seconds === null) return;
    const known = seen.get(pid);
    if (known) known.last = seconds;
    // A process first seen now started during the soak (a new backend) or was already
    // running (the services, the server's own processes): the first kind is counted from
    // zero, the second from now.
    else seen.set(pid, { group, first: samples === 0 ? seconds : 0, last: seconds });
  };

  const sampleProcesses = () => {
    for (const [name, pid] of Object.entries(options.processes)) observe(pid, name);
    for (const pid of pidsNamed(new Set(['postgres']))) {
      const known = seen.get(pid);
      const group = databasePids.has(pid) ? 'postgres: soak database' : 'postgres: rest of the server';
      // A backend is first seen before pg_stat_activity names its database: regroup it.
      if (known && known.group !== group) known.group = group;
      observe(pid, group);
    }
    for (const pid of pidsNamed(new Set(['mosquitto']))) observe(pid, 'broker (mosquitto)');
  };

  const sampleActivity = async () => {
    const { rows } = await options.pool.query<{
      pid: number;
      datname: string | null;
      active: boolean;
      query: string;
      wait: string | null;
    }>(
      `/* soak:resources */
       SELECT pid, datname, state = 'active' AS active, query,
              CASE WHEN wait_event IS NULL THEN NULL ELSE wait_event_type || ':' || wait_event END AS wait
         FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    );
    for (const row of rows) {
      if (row.datname !== options.database) continue;
      databasePids.add(row.pid);
      if (!row.active) continue;
      const name = statementName(row.query);
      const waits = statementSamples.get(name) ?? new Map<string, number>();
      const wait = row.wait ?? 'CPU';
      waits.set(wait, (waits.get(wait) ?? 0) + 1);
      statementSamples.set(name, waits);
    }
  };

  const loop = (async () => {
    while (!stopped) {
      const next = performance.now() + sampleMs;
      try {
        await sampleActivity();
        sampleProcesses();
        samples += 1;
      } catch {
        // A sample lost to a busy server is only a sample: the next one counts.
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
    }
  })();

  return {
    async stop() {
      stopped = true;
      await loop;
      sampleProcesses();
      const wallSeconds = (performance.now() - startedAt) / 1000;
      const byGroup = new Map<string, number>();
      for (const { group, first, last } of seen.values())
        byGroup.set(group, (byGroup.get(group) ?? 0) + (last - first));
      const script = process.cpuUsage(scriptStart);
      byGroup.set('this script (publisher, API load)', (script.user + script.system) / 1e6);
      const cpu = [...byGroup]
        .map(([name, seconds]) => ({ name, seconds, cores: seconds / wallSeconds }))
        .sort((a, b) => b.seconds - a.seconds);

      const total = [...statementSamples.values()].reduce(
        (sum, waits) => sum + [...waits.values()].reduce((a, b) => a + b, 0),
        0,
      );
      // The loop falls behind sampleMs on a busy box: a sample stands for its share of the wall time.
      const interval = samples === 0 ? 0 : wallSeconds / samples;
      const statements = [...statementSamples]
        .map(([statement, waits]) => {
          const count = [...waits.values()].reduce((a, b) => a + b, 0);
          const top = [...waits]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 3)
            .map(([wait, n]) => `${wait} ${Math.round((100 * n) / count)} %`)
            .join(', ');
          return {
            statement,
            seconds: count * interval,
            share: total === 0 ? 0 : (100 * count) / total,
            waits: top,
          };
        })
        .sort((a, b) => b.seconds - a.seconds);
      return { wallSeconds, cpu, statements, samples };
    },
  };
}
