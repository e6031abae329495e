import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces). */
function statFields(pid: number | string): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/**
 * CPU seconds (user + system) a PostgreSQL server has spent: its postmaster, every
 * backend and helper alive now, and the children that already exited (the postmaster's
 * cutime/cstime). Differences between two readings are the server's work meanwhile.
 */
export function postgresCpuSeconds(postmasterPid: number): number {
  // After the name: state ppid … utime (index 11) stime (12) cutime (13) cstime (14).
  const own = statFields(postmasterPid);
  if (!own) throw new Error(`no process ${postmasterPid}`);
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields && Number(fields[1]) === postmasterPid) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / ticksPerSecond;
}
