import { readFileSync } from 'node:fs';

/**
 * The whole machine's CPU time since boot, from /proc/stat, in clock ticks (1/100 s):
 * `idle` (idle and I/O wait) and `total`; busy time is their difference. Benchmarks read
 * it at both ends of a phase (the machine may be shared).
 */
export function cpuTimes(): { idle: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  return { idle: fields[3]! + fields[4]!, total: fields.reduce((sum, value) => sum + value, 0) };
}
