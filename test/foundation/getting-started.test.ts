import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/broker.ts';
import { nodeArguments } from '../support/processes.ts';

// Runs the shell blocks of docs/getting-started.md marked ```sh test:<name>, in order and
// in one bash (so variables carry from block to block, as in the reader's terminal),
// against a Gantry started as the guide says, with its own data dir and ports. Blocks
// marked `retry` read something that appears shortly after a publish: they are run again
// until their expectation holds. Blocks marked `needs=<command>` run when it is installed.

const root = path.resolve(new URL('../..', import.meta.url).pathname);
const guide = readFileSync(path.join(root, 'docs/getting-started.md'), 'utf8');

interface Block {
  name: string;
  retry: boolean;
  needs: string | null;
  code: string;
}

function testBlocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```sh test:([\w-]+)([^\n]*)\n([\s\S]*?)^```$/gm)].map((match) => ({
    name: match[1]!,
    retry: /\bretry\b/.test(match[2]!),
    needs: /\bneeds=(\S+)/.exec(match[2]!)?.[1] ?? null,
    code: match[3]!,
  }));
}

function installed(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

function devicesAnswer(output: string, deviceId: string): Record<string, unknown> | undefined {
  try {
    const body = JSON.parse(output) as { items?: Array<Record<string, unknown>> };
    return body.items?.find((item) => item.deviceId === deviceId);
  } catch {
    return undefined;
  }
}

/** What each block must print; a retry block is run again until it holds. */
const expectations: Record<string, (output: string) => boolean> = {
  setup: (output) => /ok/.test(output),
  'cli-provision': (output) =>
    new RegExp(`tenant ${uuid.source}, asset ${uuid.source}, key gk_\\S+`).test(output) &&
    output.includes('"deviceId": "rs07-tracker"'),
  'see-device': (output) => {
    const device = devicesAnswer(output, 'rs07-tracker');
    return device?.latitude === 51.9501 && device?.longitude === 4.0512;
  },
  'admin-see-device': (output) => devicesAnswer(output, 'fl03-tracker')?.latitude === 51.962,
  'unknown-list': (output) => /^rs08-tracker\s/m.test(output),
  register: (output) =>
    output.includes('"deviceId": "rs08-tracker"') && /re-parsed 1 earlier messages: 1 readings added/.test(output),
  'admin-unknown': (output) => {
    const body = JSON.parse(output) as { items: Array<{ deviceId: string }> };
    return Array.isArray(body.items) && !body.items.some((item) => item.deviceId === 'rs08-tracker');
  },
  'data-quality': (output) => output.includes('"deviceId": "rs07-tracker"') && output.includes('"ingestError"'),
};

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-guide-'));
chmodSync(dataDir, 0o755);
const scripts = mkdtempSync(path.join(os.tmpdir(), 'gantry-guide-blocks-'));
let gantry: ChildProcess;
let gantryOutput = '';
let gantryExit: Promise<number | null>;
let env: Record<string, string>;

beforeAll(async () => {
  env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? os.tmpdir(),
    GANTRY_DATA_DIR: dataDir,
    GANTRY_PORT: String(await freePort()),
    GANTRY_MQTT_PORT: String(await freePort()),
    GANTRY_EMBEDDED_PG_PORT: String(await freePort()),
    GANTRY_LOG_LEVEL: 'warn',
    GANTRY_LOG_FORMAT: 'json',
  };
  gantry = spawn(process.execPath, nodeArguments('cli', 'start'), {
    cwd: root,
    env: { ...env, GANTRY_DEMO_SIMULATOR: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  gantry.stdout!.on('data', (chunk) => (gantryOutput += String(chunk)));
  gantry.stderr!.on('data', (chunk) => (gantryOutput += String(chunk)));
  gantryExit = new Promise((resolve) => gantry.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + 200_000;
  while (!gantryOutput.includes('Press Ctrl-C to stop.')) {
    if (gantry.exitCode !== null) throw new Error(`gantry exited:\n${gantryOutput}`);
    if (Date.now() > deadline) throw new Error(`gantry did not start:\n${gantryOutput}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}, 240_000);

afterAll(async () => {
  if (gantry && gantry.exitCode === null && gantry.signalCode === null) {
    gantry.kill('SIGKILL');
    await gantryExit;
  }
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(scripts, { recursive: true, force: true });
});

/** One bash for the whole guide: each call sources a block and returns what it printed. */
function startShell() {
  const shell = spawn('bash', ['--noprofile', '--norc'], { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  shell.stdout!.on('data', (chunk) => (stdout += String(chunk)));
  shell.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  shell.stdin!.write('set -eo pipefail\n');
  let count = 0;
  return {
    async run(code: string): Promise<string> {
      count += 1;
      const file = path.join(scripts, `block-${count}.sh`);
      writeFileSync(file, code);
      const marker = `__block_${count}_done__`;
      const start = stdout.length;
      stderr = '';
      shell.stdin!.write(`source ${file}\necho ${marker}\n`);
      while (!stdout.includes(marker, start)) {
        if (shell.exitCode !== null)
          throw new Error(
            `the block failed (exit ${shell.exitCode}):\n${code}\nstdout:\n${stdout.slice(start)}\nstderr:\n${stderr}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return stdout.slice(start, stdout.indexOf(marker, start));
    },
    stderr: () => stderr,
    close: () => shell.kill('SIGKILL'),
  };
}

describe('docs/getting-started.md', () => {
  const blocks = testBlocks(guide);

  it('has its blocks marked for testing, each with an expectation where it prints what matters', () => {
    expect(blocks.map((block) => block.name)).toEqual(
      expect.arrayContaining(['setup', 'cli-provision', 'publish-mqtt', 'see-device', 'unknown-list', 'register']),
    );
    for (const name of Object.keys(expectations)) expect(blocks.map((block) => block.name)).toContain(name);
  });

  it('runs as written against a started Gantry: own fleet, first message in the API, unknown devices, bad messages', async () => {
    const shell = startShell();
    try {
      for (const block of blocks) {
        if (block.needs && !installed(block.needs)) {
          console.warn(`[getting-started] ${block.needs} is not installed: block ${block.name} skipped`);
          continue;
        }
        const expectation = expectations[block.name];
        let output = await shell.run(block.code);
        const deadline = Date.now() + 60_000;
        while (block.retry && expectation && !expectation(output) && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 500));
          output = await shell.run(block.code);
        }
        if (expectation)
          expect(expectation(output), `block ${block.name} printed:\n${output}\n${shell.stderr()}`).toBe(true);
      }
    } finally {
      shell.close();
    }
    gantry.kill('SIGINT');
    expect(await gantryExit).toBe(0);
  }, 400_000);
});
