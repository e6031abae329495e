import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/broker.ts';

// `pnpm start` stopped the way people stop it: Ctrl-C in a terminal (a pseudo-terminal
// made by util-linux `script`, so the terminal's SIGINT reaches the whole foreground
// process group, embedded PostgreSQL included unless it runs apart), and SIGTERM sent to
// pnpm by a process manager.

const root = path.resolve(new URL('../..', import.meta.url).pathname);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-stop-'));
chmodSync(dataDir, 0o755);
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
});

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

async function ports(): Promise<Record<string, string>> {
  return {
    GANTRY_PORT: String(await freePort()),
    GANTRY_MQTT_PORT: String(await freePort()),
    GANTRY_EMBEDDED_PG_PORT: String(await freePort()),
  };
}

function run(command: string, args: string[], env: Record<string, string>): Run {
  const child = spawn(command, args, {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? os.tmpdir(),
      GANTRY_DATA_DIR: dataDir,
      GANTRY_LOG_LEVEL: 'info',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_DEMO_SIMULATOR: 'false',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += String(chunk)));
  child.stderr!.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitForBanner(gantry: Run): Promise<void> {
  const deadline = Date.now() + 150_000;
  while (!gantry.output().includes('Press Ctrl-C to stop.')) {
    if (gantry.child.exitCode !== null) throw new Error(`gantry exited early:\n${gantry.output()}`);
    if (Date.now() > deadline) throw new Error(`gantry did not start:\n${gantry.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Log lines at WARN (40) or above, as pino writes them in JSON. */
function warnings(output: string): string[] {
  return output.split(/\r?\n/).filter((line) => /"level":(4|5|6)0/.test(line));
}

const hasScript = existsSync('/usr/bin/script');

describe('stopping `pnpm start`', () => {
  it.runIf(hasScript)(
    'Ctrl-C in a terminal exits 0 with no WARN, and stops the embedded PostgreSQL after the services',
    async () => {
      const gantry = run('script', ['-qfec', 'exec pnpm start', '/dev/null'], await ports());
      await waitForBanner(gantry);
      // The embedded broker speaks MQTT 3.1.1: said at INFO, it is not a warning.
      expect(gantry.output()).toMatch(/"level":30[^\n]*does not speak MQTT 5/);
      gantry.child.stdin!.write('\x03');
      expect(await gantry.exited, gantry.output()).toBe(0);
      expect(gantry.output()).toContain('"signal":"SIGINT"');
      expect(warnings(gantry.output())).toEqual([]);
      // A clean PostgreSQL shutdown removes its pid file.
      expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
    },
    240_000,
  );

  it('SIGTERM to pnpm reaches Gantry, which stops as quietly, and pnpm waits for it', async () => {
    const gantry = run('pnpm', ['start'], await ports());
    await waitForBanner(gantry);
    gantry.child.kill('SIGTERM');
    await gantry.exited;
    // pnpm itself ends as terminated by the signal it forwarded (or with Gantry's 0).
    expect([0, null], gantry.output()).toContain(gantry.child.exitCode);
    expect(gantry.output()).toContain('"signal":"SIGTERM"');
    expect(gantry.output()).toContain('"msg":"worker stopped"');
    expect(warnings(gantry.output())).toEqual([]);
    expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
  }, 240_000);
});
