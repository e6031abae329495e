/**
 * pnpm bench:console — what the operations console costs a browser, on the demo.
 *
 * Starts `gantry start` as a user does (its own database gantry_bench_console, an
 * embedded broker, the demo tenant and its simulated fleet), takes the console's URL
 * and the demo key from what it prints, waits until the demo's history is derived, then
 * in headless Chromium (Debian's chromium, through playwright-core):
 *
 * - weight: every file the console loads while its four pages are opened, as sent
 *   (gzipped), own files and vendor files apart; budget 300 KB. Beside it, the same
 *   measure of the API reference page (/docs, swagger-ui) as the baseline.
 * - first render: from navigation start to the data-quality table showing the demo's
 *   devices, signed in (the key already in the tab), in a fresh browser profile each
 *   time (cold cache), and again reloaded (warm cache); median of GANTRY_BENCH_RUNS
 *   (default 5); budget 1 s. Beside it, the baseline: the same data-quality answer
 *   fetched alone from Node, which the page cannot beat.
 *
 * Each figure is printed with the load average. GANTRY_BENCH_KEEP=1 keeps the database.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser } from 'playwright-core';
import { freePort } from '../support/broker.ts';
import { benchServerUrl, onServer, withDatabase } from '../support/database-url.ts';
import { nodeArguments, repoRoot } from '../support/processes.ts';

const DATABASE = 'gantry_bench_console';
const RUNS = Number(process.env.GANTRY_BENCH_RUNS ?? 5);
const WEIGHT_BUDGET = 300 * 1024;
const RENDER_BUDGET_MS = 1000;
const CHROMIUM = process.env.GANTRY_CHROMIUM ?? '/usr/bin/chromium';

const load = () => `load ${os.loadavg()[0]!.toFixed(2)}`;
const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
function log(message: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

interface Started {
  consoleUrl: string;
  apiUrl: string;
  tenantKey: string;
  stop(): Promise<void>;
}

/** `gantry start` in a child process; resolves once it printed its banner. */
async function startGantry(databaseUrl: string): Promise<Started> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gantry-bench-console-'));
  const child = spawn(process.execPath, nodeArguments('cli', 'start'), {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      GANTRY_DATABASE_URL: databaseUrl,
      GANTRY_HOST: '127.0.0.1',
      GANTRY_PORT: String(await freePort()),
      GANTRY_MQTT_PORT: String(await freePort()),
      GANTRY_DATA_DIR: dataDir,
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  };
  let consoleUrl = '';
  let tenantKey = '';
  for await (const line of createInterface({ input: child.stdout! })) {
    consoleUrl ||= line.match(/Console:\s+(\S+)/)?.[1] ?? '';
    tenantKey ||= line.match(/Demo tenant key:\s+(\S+)/)?.[1] ?? '';
    if (line.startsWith('Press Ctrl-C')) break;
  }
  child.stdout!.resume();
  if (!consoleUrl || !tenantKey) {
    await stop();
    throw new Error('gantry start printed no console URL or no demo key');
  }
  return { consoleUrl, apiUrl: `${new URL(consoleUrl).origin}/api/external/v1`, tenantKey, stop };
}

/** A script for the page: the key already in the tab, as after signing in. */
const signedIn = (key: string) => `sessionStorage.setItem('gantry.console.apiKey', ${JSON.stringify(key)});`;

const FIRST_ROW = '.page-quality section[aria-labelledby="quality-devices"] tbody tr th';
/**
 * Notes (performance.now(), ms since navigation) when the first device row enters the
 * page. Injected before the page's scripts; the page's policy forbids evaluating strings,
 * so nothing is polled from outside.
 */
const RECORD_FIRST_ROWS = `
new MutationObserver((_, observer) => {
  if (document.querySelector(${JSON.stringify(FIRST_ROW)})) {
    window.__gantryFirstRows = performance.now();
    observer.disconnect();
  }
}).observe(document, { childList: true, subtree: true });`;

/** Waits (at most 5 minutes) until the demo's uploaded history shows in utilization. */
async function waitForHistory(started: Started): Promise<void> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const from = new Date(Date.now() - 12 * 3_600_000).toISOString();
    const response = await fetch(`${started.apiUrl}/telemetry/utilization?from=${from}&bucket=hour`, {
      headers: { 'X-API-Key': started.tenantKey },
    });
    const body = (await response.json()) as { items?: Array<{ runningSeconds: number }> };
    const hours = body.items?.filter((item) => item.runningSeconds > 0).length ?? 0;
    if (hours >= 6) return;
    if (Date.now() > deadline) throw new Error(`the demo history did not arrive (${hours} hours with data)`);
    await sleep(2000);
  }
}

/** Bytes sent (gzipped) for every file of the page's origin under `prefix`, by file. */
async function pageWeight(
  browser: Browser,
  started: Started,
  urls: string[],
  prefix: string,
  ready: (page: import('playwright-core').Page) => Promise<void>,
): Promise<Map<string, number>> {
  const context = await browser.newContext();
  await context.addInitScript({ content: signedIn(started.tenantKey) });
  const page = await context.newPage();
  const files = new Map<string, number>();
  page.on('requestfinished', async (request) => {
    const url = new URL(request.url());
    if (!url.pathname.startsWith(prefix)) return;
    const sizes = await request.sizes();
    files.set(url.pathname, sizes.responseBodySize);
  });
  for (const url of urls) {
    await page.goto(url);
    await ready(page);
  }
  await sleep(500);
  await context.close();
  return files;
}

async function main(): Promise<void> {
  const serverUrl = benchServerUrl();
  await onServer(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${DATABASE}`);
  }, serverUrl);
  log(`starting gantry start on ${DATABASE} (${load()})`);
  const started = await startGantry(withDatabase(serverUrl, DATABASE));
  let browser: Browser | undefined;
  try {
    log(`console at ${started.consoleUrl}; waiting for the demo history to be derived`);
    await waitForHistory(started);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu'],
    });

    const consoleFiles = await pageWeight(
      browser,
      started,
      ['quality', 'fleet', 'usage', 'alerts'].map((id) => `${started.consoleUrl}#/${id}`),
      '/console',
      async (page) => {
        // Each page's own content, so the map and chart libraries it loads on demand are in.
        const shown = await page.locator('#page > section:not([hidden])').getAttribute('class');
        const ready: Record<string, string> = {
          'page-quality': '.page-quality tbody tr',
          'page-fleet': '.leaflet-marker-icon',
          'page-usage': '.chart-utilization canvas',
          'page-alerts': '.page-alerts tbody tr',
        };
        const id = Object.keys(ready).find((name) => shown?.includes(name));
        await page
          .locator(id ? ready[id]! : '#page h1')
          .first()
          .waitFor({ state: 'attached' });
      },
    );
    const referenceFiles = await pageWeight(
      browser,
      started,
      [`${started.apiUrl}/docs`],
      '/api/external/v1/docs',
      async (page) => {
        await page.locator('.opblock').first().waitFor();
      },
    );
    const sum = (files: Map<string, number>, filter: (name: string) => boolean = () => true) =>
      [...files].filter(([name]) => filter(name)).reduce((total, [, bytes]) => total + bytes, 0);
    const total = sum(consoleFiles);
    const vendor = sum(consoleFiles, (name) => name.startsWith('/console/vendor/'));
    const reference = sum(referenceFiles);
    for (const [name, bytes] of [...consoleFiles].sort((a, b) => b[1] - a[1]))
      log(`  ${kb(bytes).padStart(9)}  ${name}`);
    log(
      `weight: console ${kb(total)} gzipped (own ${kb(total - vendor)}, vendor ${kb(vendor)}) in ${consoleFiles.size} files; ` +
        `budget ${kb(WEIGHT_BUDGET)} (${((total / WEIGHT_BUDGET) * 100).toFixed(0)} % of it); ` +
        `baseline API reference page ${kb(reference)} → ratio ${(total / reference).toFixed(2)} (${load()})`,
    );

    const cold: number[] = [];
    const warm: number[] = [];
    /** When the data-quality answer had arrived in the cold runs (ms after navigation start). */
    const answered: number[] = [];
    /** When the page had asked for it: what the page's own loading costs before the data. */
    const asked: number[] = [];
    for (let run = 0; run < RUNS; run += 1) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      await context.addInitScript({ content: signedIn(started.tenantKey) + RECORD_FIRST_ROWS });
      const page = await context.newPage();
      for (const sample of [cold, warm]) {
        if (sample === cold) await page.goto(`${started.consoleUrl}#/quality`);
        else await page.reload();
        await page.locator(FIRST_ROW).first().waitFor({ timeout: 30_000 });
        sample.push((await page.evaluate('window.__gantryFirstRows')) as number);
        if (sample === cold) {
          const timing = (await page.evaluate(`(() => {
            const entry = performance.getEntriesByType('resource').find((resource) => resource.name.includes('/telemetry/data-quality'));
            return { asked: entry ? entry.startTime : NaN, answered: entry ? entry.responseEnd : NaN };
          })()`)) as { asked: number; answered: number };
          asked.push(timing.asked);
          answered.push(timing.answered);
        }
      }
      await context.close();
    }
    const answers: number[] = [];
    for (let run = 0; run < RUNS; run += 1) {
      const begun = performance.now();
      const response = await fetch(`${started.apiUrl}/telemetry/data-quality`, {
        headers: { 'X-API-Key': started.tenantKey },
      });
      await response.arrayBuffer();
      answers.push(performance.now() - begun);
    }
    const answer = median(answers);
    log(
      `first render, cold cache: median ${median(cold).toFixed(0)} ms of ${RUNS} [${cold.map((v) => v.toFixed(0)).join(', ')}]; ` +
        `budget ${RENDER_BUDGET_MS} ms; baseline data-quality answer alone ${answer.toFixed(0)} ms → ratio ${(median(cold) / answer).toFixed(1)} (${load()})`,
    );
    log(
      `  the page asked for /telemetry/data-quality at median ${median(asked).toFixed(0)} ms and had it at ` +
        `${median(answered).toFixed(0)} ms: the API's answer takes ${(median(answered) - median(asked)).toFixed(0)} ms of the render ` +
        `under the page's own load (${load()})`,
    );
    log(
      `first render, warm cache: median ${median(warm).toFixed(0)} ms [${warm.map((v) => v.toFixed(0)).join(', ')}] → ratio ${(median(warm) / answer).toFixed(1)} (${load()})`,
    );
    const ok = total <= WEIGHT_BUDGET && median(cold) <= RENDER_BUDGET_MS;
    log(ok ? 'within both budgets' : 'OVER BUDGET');
    process.exitCode = ok ? 0 : 1;
  } finally {
    await browser?.close();
    await started.stop();
    if (!process.env.GANTRY_BENCH_KEEP)
      await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`), serverUrl);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
