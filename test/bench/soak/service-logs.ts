import type { ServiceProcess } from '../../support/processes.ts';

/** Error and warning lines a service wrote to stderr (pino JSON; anything else is kept as text). */
export interface LogWatch {
  /** Lines with "level" ≥ 50 (error, fatal) since the start. */
  errors: number;
  /** Lines with "level" 40 (warn). */
  warnings: number;
  /** Lines that are not pino JSON (a crash's stack trace, a node warning). */
  other: number;
  /** The first few lines of each kind, for the report. */
  samples: string[];
}

export function watchLogs(service: ServiceProcess): LogWatch {
  const watch: LogWatch = { errors: 0, warnings: 0, other: 0, samples: [] };
  let partial = '';
  const keep = (line: string) => {
    if (watch.samples.length < 12) watch.samples.push(`${service.name}: ${line.slice(0, 400)}`);
  };
  const take = (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      let level: number | null = null;
      try {
        const parsed = JSON.parse(line) as { level?: unknown };
        if (typeof parsed.level === 'number') level = parsed.level;
      } catch {
        level = null;
      }
      if (level === null) {
        watch.other += 1;
        keep(line);
      } else if (level >= 50) {
        watch.errors += 1;
        keep(line);
      } else if (level >= 40) {
        watch.warnings += 1;
        keep(line);
      }
    }
  };
  // What it wrote while starting (spawnService keeps the last 8 KiB), then everything after.
  const earlier = service.stderr();
  take(earlier.length >= 8192 ? earlier.slice(earlier.indexOf('\n') + 1) : earlier);
  service.child.stderr!.on('data', (chunk: Buffer) => take(chunk.toString()));
  return watch;
}
