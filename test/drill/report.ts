/**
 * What a drill prints: a timeline of what it did (printed as it happens, with the time
 * since the drill started and the counts at that moment), then the counts and one
 * PASS/FAIL line per check.
 */
export const fmt = (value: number) => Math.round(value).toLocaleString('en-US');

const formatValue = (value: number | string) => (typeof value === 'number' ? fmt(value) : value);

/** What every drill gets: its report, its clean-up list, and the run's size. */
export interface DrillContext {
  report: DrillReport;
  cleanup: Cleanup;
  /** Readings per ingest drill (DRILL_MESSAGES). */
  messages: number;
  devices: number;
}

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export class DrillReport {
  private readonly started = performance.now();
  private readonly counts: Array<{ label: string; value: string }> = [];
  readonly checks: Check[] = [];

  constructor(readonly name: string) {}

  seconds(): number {
    return (performance.now() - this.started) / 1000;
  }

  /** One line of the timeline: what was just done, and counts at that moment. */
  step(what: string, counts: Record<string, number | string> = {}): void {
    const figures = Object.entries(counts)
      .map(([label, value]) => `${label} ${formatValue(value)}`)
      .join(', ');
    console.log(`  t+${this.seconds().toFixed(1).padStart(6)} s  ${what}${figures ? `  [${figures}]` : ''}`);
  }

  count(label: string, value: number | string): void {
    this.counts.push({ label, value: formatValue(value) });
  }

  check(name: string, ok: boolean, detail: string): boolean {
    this.checks.push({ name, ok, detail });
    return ok;
  }

  get passed(): boolean {
    return this.checks.length > 0 && this.checks.every((check) => check.ok);
  }

  print(): void {
    if (this.counts.length > 0) {
      console.log('  counts');
      const width = Math.max(...this.counts.map((entry) => entry.label.length));
      const valueWidth = Math.max(...this.counts.map((entry) => entry.value.length));
      for (const { label, value } of this.counts)
        console.log(`    ${label.padEnd(width)}  ${value.padStart(valueWidth)}`);
    }
    console.log('  checks');
    const width = Math.max(0, ...this.checks.map((check) => check.name.length));
    for (const check of this.checks)
      console.log(`    ${check.ok ? 'PASS' : 'FAIL'}  ${check.name.padEnd(width)}  ${check.detail}`);
    if (this.checks.length === 0) console.log('    FAIL  the drill made no check');
  }
}

/** Clean-up steps run in reverse order of registration, each once, whatever failed before. */
export class Cleanup {
  private readonly steps: Array<{ label: string; run: () => Promise<unknown> }> = [];

  add(label: string, run: () => Promise<unknown>): void {
    this.steps.push({ label, run });
  }

  async runAll(): Promise<void> {
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await step.run();
      } catch (error) {
        console.error(`  clean-up of ${step.label} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
}
