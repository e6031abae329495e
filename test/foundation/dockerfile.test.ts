import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { repoRoot } from '../support/processes.ts';

// No Docker engine here: the Dockerfile is read for the rules of a lean image, and the
// production install it describes is carried out into a temporary directory, from which
// the API is started with node the way the image's CMD starts it.

const run = promisify(execFile);

interface Instruction {
  keyword: string;
  args: string;
}

/** The Dockerfile's stages, each the list of its instructions (continuation lines joined). */
function readStages(): Instruction[][] {
  const text = readFileSync(path.join(repoRoot, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const stages: Instruction[][] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const [, keyword, args] = /^(\S+)\s+(.*)$/.exec(trimmed)!;
    const instruction = { keyword: keyword!.toUpperCase(), args: args!.replace(/\s+/g, ' ').trim() };
    if (instruction.keyword === 'FROM') stages.push([]);
    stages.at(-1)!.push(instruction);
  }
  return stages;
}

const stages = readStages();
const finalStage = stages.at(-1)!;
const buildStages = stages.slice(0, -1);
const allOf = (stage: Instruction[], keyword: string) => stage.filter((instruction) => instruction.keyword === keyword);
const oneOf = (stage: Instruction[], keyword: string) => allOf(stage, keyword).at(-1)!;
/** The exec form of CMD or HEALTHCHECK CMD: a JSON array. */
const execForm = (args: string) => JSON.parse(args.slice(args.indexOf('['))) as string[];

/** The production install: `node scripts/assemble-production.mjs <dir>` in a build stage. */
const assemble = buildStages
  .flatMap((stage) => allOf(stage, 'RUN'))
  .map((instruction) => /node scripts\/assemble-production\.mjs (\S+)/.exec(instruction.args))
  .find((match) => match !== null);

describe('the Dockerfile', () => {
  it('builds in a stage of its own and ships a final stage with the assembled production tree only', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const buildName = /\bAS (\S+)/i.exec(buildStages.at(-1)![0]!.args)?.[1];
    expect(buildName).toBeDefined();
    // The compiler runs in the build stage, which also assembles the production tree.
    expect(allOf(buildStages.at(-1)!, 'RUN').map((instruction) => instruction.args)).toContain('pnpm build');
    expect(assemble?.[1]).toBe('/app');
    // The final stage starts from a plain Node image and takes from the build stage only
    // that tree: no sources, no dev dependencies, no install of its own.
    expect(finalStage[0]!.args).toMatch(/^node:\S+$/);
    const copies = allOf(finalStage, 'COPY');
    expect(copies.map((copy) => copy.args)).toEqual([`--from=${buildName} ${assemble![1]} /app`]);
    expect(allOf(finalStage, 'RUN').some((instruction) => /pnpm|npm install/.test(instruction.args))).toBe(false);
  });

  it('runs as a user that is not root, checks /readyz with node, and starts node itself', () => {
    expect(oneOf(finalStage, 'USER').args).not.toMatch(/^(root|0)(:|$)/);
    const healthcheck = execForm(oneOf(finalStage, 'HEALTHCHECK').args);
    expect(healthcheck[0]).toBe('node');
    expect(healthcheck.join(' ')).toContain('/readyz');
    const command = execForm(oneOf(finalStage, 'CMD').args);
    expect(command[0]).toBe('node');
    expect(command).toContain('services/api/dist/main.js');
  });

  it('has docker-compose.yml start each service with node on a built entry point the image holds', () => {
    const compose = readFileSync(path.join(repoRoot, 'docker-compose.yml'), 'utf8');
    const commands = [...compose.matchAll(/^\s+command: (\[.*\])$/gm)].map(
      (match) => JSON.parse(match[1]!) as string[],
    );
    expect(commands.map((command) => command.at(-1))).toEqual([
      'services/api/dist/main.js',
      'services/ingest/dist/main.js',
      'services/worker/dist/main.js',
    ]);
    for (const command of commands) expect(command[0]).toBe('node');
  });
});

describe('the production install the Dockerfile describes', () => {
  let tree: string;
  let db: TestDatabase;
  let api: ChildProcess | undefined;
  let apiOutput = '';

  beforeAll(async () => {
    tree = mkdtempSync(path.join(os.tmpdir(), 'gantry-image-'));
    db = await createTestDatabase('dockerfile_install');
    // The same script as the image's build stage (dist/ is built by the global setup),
    // from the local pnpm store: the test downloads nothing.
    await run(process.execPath, ['scripts/assemble-production.mjs', tree, '--offline'], {
      cwd: repoRoot,
      maxBuffer: 16 * 1024 * 1024,
    });
  }, 300_000);

  afterAll(async () => {
    if (api && api.exitCode === null && api.signalCode === null) {
      api.kill('SIGTERM');
      await new Promise((resolve) => api!.once('exit', resolve));
    }
    await db?.drop();
    if (tree) rmSync(tree, { recursive: true, force: true });
  });

  it('holds built JavaScript, db/ and production dependencies, without TypeScript sources or dev dependencies', () => {
    expect(existsSync(path.join(tree, 'services/api/dist/main.js'))).toBe(true);
    expect(existsSync(path.join(tree, 'services/cli/dist/main.js'))).toBe(true);
    expect(existsSync(path.join(tree, 'services/api/src'))).toBe(false);
    expect(readdirSync(path.join(tree, 'db/migrations')).length).toBeGreaterThan(0);
    const installed = readdirSync(path.join(tree, 'node_modules/.pnpm'));
    expect(installed.some((name) => name.startsWith('koa@'))).toBe(true);
    for (const devOnly of ['typescript@', 'vitest@', 'tsx@', '@biomejs+biome@'])
      expect(installed.filter((name) => name.startsWith(devOnly))).toEqual([]);
  });

  it("starts the API as the image's CMD does, and answers its HEALTHCHECK", async () => {
    const port = String(await freePort());
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: os.tmpdir(),
      NODE_ENV: 'production',
      GANTRY_DATA_DIR: path.join(tree, 'data'),
      GANTRY_DATABASE_URL: db.url,
      GANTRY_MQTT_URL: inject('mqttUrl'),
      GANTRY_RUN_MIGRATIONS: 'false',
      GANTRY_HOST: '127.0.0.1',
      GANTRY_PORT: port,
      GANTRY_LOG_LEVEL: 'warn',
    };
    const [, ...args] = execForm(oneOf(finalStage, 'CMD').args);
    api = spawn(process.execPath, args, { cwd: tree, env, stdio: ['ignore', 'pipe', 'pipe'] });
    api.stdout!.on('data', (chunk) => (apiOutput += String(chunk)));
    api.stderr!.on('data', (chunk) => (apiOutput += String(chunk)));

    const deadline = Date.now() + 90_000;
    let ready: { status: number; body: unknown } = { status: 0, body: null };
    while (ready.status !== 200) {
      if (api.exitCode !== null) throw new Error(`the API exited:\n${apiOutput}`);
      if (Date.now() > deadline) throw new Error(`/readyz answered ${ready.status}:\n${apiOutput}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
      ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        async (response) => ({ status: response.status, body: await response.json() }),
        () => ready,
      );
    }
    expect(ready.body).toMatchObject({ status: 'ready', checks: { database: { ok: true }, broker: { ok: true } } });

    // The HEALTHCHECK's own command, run in the tree with the container's environment.
    const [, ...probe] = execForm(oneOf(finalStage, 'HEALTHCHECK').args);
    await expect(run(process.execPath, probe, { cwd: tree, env })).resolves.toBeDefined();
  }, 120_000);
});
