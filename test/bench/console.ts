/**
 * pnpm bench:console — what the operations console costs a browser, on the demo and on
 * a tenant of GANTRY_BENCH_MACHINES machines (default 10,000).
 *
 * Starts `gantry start` as a user does (its own database gantry_bench_console, an
 * embedded broker, the demo tenant and its simulated fleet), takes the console's URL
 * and the demo key from what it prints, waits until the demo's history is derived, then
 * in headless Chromium (Debian's chromium, through playwright-core):
 *
 * The demo (the baseline):
 * - weight: every file the console loads while its four pages are opened, as sent
 *   (gzipped), own files and vendor files apart; budget 300 KB. Beside it, the same
 *   measure of the API reference page (/docs, swagger-ui) as the baseline.
 * - first render: from navigation start to the data-quality table showing the demo's
 *   devices, signed in (the key already in the tab), in a fresh browser profile each
 *   time (cold cache), and again reloaded (warm cache); median of GANTRY_BENCH_RUNS
 *   (default 5); budget 1 s. Beside it, the baseline: the same data-quality answer
 *   fetched alone from Node, which the page cannot beat.
 *
 * The large tenant (made in the same Gantry through the admin API: one import file, one
 * GPS fix per machine and some bad data over MQTT, test/support/large-fleet.ts):
 * - first render, cold and warm, to the data-quality table (its page of the machines
 *   needing attention); budget 1.5 s cold.
 * - each data-quality refresh (every 5 s) over the wire: headers and body as received;
 *   budget 200 KB. Beside it, the whole report (no paging) the page used to read.
 * - a 3-second position update on the fleet page: the main thread's busy time (Chrome's
 *   own TaskDuration, from the DevTools protocol's Performance.getMetrics) from one map
 *   answer to the next, i.e. everything the page did in one cycle (the map's marks, the
 *   list's page, timers, style, layout, paint), while 500 machines get a new fix every
 *   3 s; as CPU time and as wall time (CPU time plus waits for a core), median and worst
 *   of GANTRY_BENCH_CYCLES (10) cycles, framed on the whole fleet (clusters) and zoomed in
 *   on a yard (the machines themselves, named); budget 100 ms for the worst wall time.
 *   Beside it: what the map's answers weigh, and what the API takes for them from Node.
 *
 * Each figure is printed with the load average. GANTRY_BENCH_KEEP=1 keeps the database.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { freePort } from '../support/broker.ts';
import { benchServerUrl, onServer, withDatabase } from '../support/database-url.ts';
import {
  type LargeFleet,
  nudgeLargeFleet,
  provisionLargeFleet,
  publishLargeFleet,
  waitForLargeFleet,
} from '../support/large-fleet.ts';
import { nodeArguments, repoRoot } from '../support/processes.ts';
import { positiveSetting } from './settings.ts';

const DATABASE = 'gantry_bench_console';
const RUNS = positiveSetting('GANTRY_BENCH_RUNS', 5);
const MACHINES = positiveSetting('GANTRY_BENCH_MACHINES', 10_000);
const CYCLES = positiveSetting('GANTRY_BENCH_CYCLES', 10);
const WEIGHT_BUDGET = 300 * 1024;
const RENDER_BUDGET_MS = 1000;
const LARGE_RENDER_BUDGET_MS = 1500;
const REFRESH_BUDGET_BYTES = 200 * 1024;
const UPDATE_BUDGET_MS = 100;
/** Machines given a new fix every 3 s while the fleet page is measured. */
const MOVING = 500;
const ADMIN_TOKEN = `bench-console-${Date.now().toString(36)}-admin-token`;
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
  adminUrl: string;
  mqttUrl: string;
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
      GANTRY_ADMIN_TOKEN: ADMIN_TOKEN,
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
  let mqttUrl = '';
  for await (const line of createInterface({ input: child.stdout! })) {
    consoleUrl ||= line.match(/Console:\s+(\S+)/)?.[1] ?? '';
    tenantKey ||= line.match(/Demo tenant key:\s+(\S+)/)?.[1] ?? '';
    mqttUrl ||= line.match(/MQTT:\s+(\S+)/)?.[1] ?? '';
    if (line.startsWith('Press Ctrl-C')) break;
  }
  child.stdout!.resume();
  if (!consoleUrl || !tenantKey || !mqttUrl) {
    await stop();
    throw new Error('gantry start printed no console URL, demo key or MQTT URL');
  }
  const origin = new URL(consoleUrl).origin;
  return {
    consoleUrl,
    apiUrl: `${origin}/api/external/v1`,
    adminUrl: `${origin}/api/admin/v1`,
    mqttUrl,
    tenantKey,
    stop,
  };
}

/** A script for the page: the key already in the tab, as after signing in. */
const signedIn = (key: string) => `sessionStorage.setItem('gantry.console.apiKey', ${JSON.stringify(key)});`;

/** The data-quality table with data: a device row, or the row saying none needs attention. */
const FIRST_ROW = '.page-quality section[aria-labelledby="quality-devices"] tbody tr';
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
  ready: (page: Page) => Promise<void>,
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

interface RenderFigures {
  cold: number[];
  warm: number[];
  /** When the cold runs' page asked for the data-quality answer, and had it (ms after navigation start). */
  asked: number[];
  answered: number[];
}

/**
 * From navigation start to the data-quality table with data, signed in, in a fresh
 * browser context each run (cold cache) and reloaded (warm cache).
 */
async function firstRender(browser: Browser, consoleUrl: string, key: string): Promise<RenderFigures> {
  const figures: RenderFigures = { cold: [], warm: [], asked: [], answered: [] };
  for (let run = 0; run < RUNS; run += 1) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addInitScript({ content: signedIn(key) + RECORD_FIRST_ROWS });
    const page = await context.newPage();
    for (const sample of [figures.cold, figures.warm]) {
      if (sample === figures.cold) await page.goto(`${consoleUrl}#/quality`);
      else await page.reload();
      await page.locator(FIRST_ROW).first().waitFor({ timeout: 30_000 });
      sample.push((await page.evaluate('window.__gantryFirstRows')) as number);
      if (sample === figures.cold) {
        const timing = (await page.evaluate(`(() => {
          const entry = performance.getEntriesByType('resource').find((resource) => resource.name.includes('/telemetry/data-quality'));
          return { asked: entry ? entry.startTime : NaN, answered: entry ? entry.responseEnd : NaN };
        })()`)) as { asked: number; answered: number };
        figures.asked.push(timing.asked);
        figures.answered.push(timing.answered);
      }
    }
    await context.close();
  }
  return figures;
}

/** One answer from Node with the key: its wall time and body size (a 429 waits and asks again). */
async function timedGet(apiUrl: string, path: string, key: string): Promise<{ ms: number; bytes: number }> {
  for (;;) {
    const begun = performance.now();
    const response = await fetch(`${apiUrl}${path}`, { headers: { 'X-API-Key': key } });
    const bytes = (await response.arrayBuffer()).byteLength;
    const ms = performance.now() - begun;
    if (response.status === 429) {
      await sleep(1000);
      continue;
    }
    if (!response.ok) throw new Error(`${path} answered ${response.status}`);
    return { ms, bytes };
  }
}

/** Median wall time and size of `path` fetched from Node, over `runs` calls 100 ms apart (within the key's rate). */
async function fetchedAlone(apiUrl: string, path: string, key: string, runs = RUNS) {
  const times: number[] = [];
  let bytes = 0;
  for (let run = 0; run < runs; run += 1) {
    const answer = await timedGet(apiUrl, path, key);
    times.push(answer.ms);
    bytes = answer.bytes;
    await sleep(100);
  }
  return { ms: median(times), bytes };
}

function printRender(label: string, figures: RenderFigures, budgetMs: number, answerMs: number): void {
  const list = (values: number[]) => values.map((value) => value.toFixed(0)).join(', ');
  log(
    `${label} first render, cold cache: median ${median(figures.cold).toFixed(0)} ms of ${RUNS} [${list(figures.cold)}]; ` +
      `budget ${budgetMs} ms; baseline data-quality answer alone ${answerMs.toFixed(0)} ms → ratio ${(median(figures.cold) / answerMs).toFixed(1)} (${load()})`,
  );
  log(
    `  the page asked for /telemetry/data-quality at median ${median(figures.asked).toFixed(0)} ms and had it at ` +
      `${median(figures.answered).toFixed(0)} ms: the API's answer takes ${(median(figures.answered) - median(figures.asked)).toFixed(0)} ms of the render ` +
      `under the page's own load (${load()})`,
  );
  log(
    `${label} first render, warm cache: median ${median(figures.warm).toFixed(0)} ms [${list(figures.warm)}] → ratio ${(median(figures.warm) / answerMs).toFixed(1)} (${load()})`,
  );
}

/** Over-the-wire size (headers and body as received) of each data-quality refresh of an open page, `count` of them. */
async function qualityRefreshes(browser: Browser, consoleUrl: string, key: string, count: number): Promise<number[]> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addInitScript({ content: signedIn(key) });
  const page = await context.newPage();
  const sizes: number[] = [];
  let done: () => void = () => {};
  const enough = new Promise<void>((resolve) => {
    done = resolve;
  });
  page.on('requestfinished', async (request) => {
    if (!request.url().includes('/telemetry/data-quality')) return;
    const size = await request.sizes();
    sizes.push(size.responseHeadersSize + size.responseBodySize);
    if (sizes.length >= count) done();
  });
  await page.goto(`${consoleUrl}#/quality`);
  await Promise.race([enough, sleep(count * 5000 + 30_000)]);
  await context.close();
  return sizes.slice(0, count);
}

interface CycleFigures {
  /** Main-thread CPU time from one map answer to the next (ms). */
  cpu: number[];
  /** Main-thread busy wall time over the same cycles (ms): the CPU time plus waits for a core on a busy machine. */
  wall: number[];
  /** Bytes (headers and body) of the map's answers in those cycles. */
  mapBytes: number[];
  mode: string;
  shown: string;
  marks: string;
}

/** Chrome's TaskDuration (seconds its main thread ran tasks) in one time domain, through a DevTools session of its own. */
async function taskDuration(page: Page, timeDomain: 'threadTicks' | 'timeTicks') {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable', { timeDomain });
  return {
    async read() {
      const { metrics } = await cdp.send('Performance.getMetrics');
      return metrics.find((metric) => metric.name === 'TaskDuration')!.value * 1000;
    },
    detach: () => cdp.detach(),
  };
}

/**
 * The fleet page's main-thread work per 3-second update: Chrome's own TaskDuration (the
 * time its main thread spent running tasks of any kind: script, style, layout, paint),
 * as CPU time (thread ticks) and as wall time, read through the DevTools protocol a
 * second after each map answer arrived; the difference between two readings is one
 * whole cycle's work. While it runs, MOVING machines get a new fix every 3 s.
 */
async function updateCycles(page: Page, started: Started, fleet: LargeFleet): Promise<CycleFigures> {
  const cpuClock = await taskDuration(page, 'threadTicks');
  const wallClock = await taskDuration(page, 'timeTicks');
  const mapBytes: number[] = [];
  let arrived: () => void = () => {};
  const onAnswer = async (request: import('playwright-core').Request) => {
    if (!new URL(request.url()).searchParams.has('bbox')) return;
    const size = await request.sizes();
    mapBytes.push(size.responseHeadersSize + size.responseBodySize);
    arrived();
  };
  page.on('requestfinished', onAnswer);
  const nextAnswer = () =>
    new Promise<void>((resolve) => {
      arrived = resolve;
    });
  let moving = true;
  const mover = (async () => {
    const movers = fleet.machines.filter((machine) => machine.latitude !== null).slice(0, MOVING);
    for (let step = 1; moving; step += 1) {
      await nudgeLargeFleet(started.mqttUrl, movers, step).catch(() => undefined);
      await sleep(3000);
    }
  })();
  const cpu: number[] = [];
  const wall: number[] = [];
  try {
    await nextAnswer();
    await sleep(1000);
    let previous = [await cpuClock.read(), await wallClock.read()] as const;
    mapBytes.length = 0;
    while (cpu.length < CYCLES) {
      await nextAnswer();
      await sleep(1000);
      const now = [await cpuClock.read(), await wallClock.read()] as const;
      cpu.push(now[0] - previous[0]);
      wall.push(now[1] - previous[1]);
      previous = now;
    }
  } finally {
    moving = false;
    page.off('requestfinished', onAnswer);
    await mover;
    await cpuClock.detach();
    await wallClock.detach();
  }
  const shows = await page.$eval('.map', (map) => ({
    mode: map.getAttribute('data-mode') ?? '',
    shown: map.getAttribute('data-shown') ?? '',
    marks: map.getAttribute('data-marks') ?? '',
  }));
  return { cpu, wall, mapBytes, ...shows };
}

/** Clicks the mark holding the most machines, as the page's last answer has it, until the map shows machines one by one. */
async function zoomIntoAYard(page: Page, started: Started, key: string, lastQuery: () => string): Promise<void> {
  for (let click = 0; click < 8; click += 1) {
    if ((await page.$eval('.map', (map) => map.getAttribute('data-mode'))) === 'machines') return;
    const query = lastQuery();
    const response = await fetch(`${started.apiUrl}/telemetry/devices/clusters${query}`, {
      headers: { 'X-API-Key': key },
    });
    const answer = (await response.json()) as {
      bbox: number[];
      zoom: number;
      cells: Array<{ count: number; latitude: number; longitude: number }>;
    };
    const biggest = answer.cells.reduce((a, b) => (b.count > a.count ? b : a));
    const world = 256 * 2 ** answer.zoom;
    const y = (lat: number) => {
      const phi = (lat * Math.PI) / 180;
      return ((1 - Math.log(Math.tan(phi) + 1 / Math.cos(phi)) / Math.PI) / 2) * world;
    };
    const x = ((biggest.longitude - answer.bbox[0]!) / 360) * world;
    const box = (await page.locator('.map').boundingBox())!;
    await page.mouse.click(box.x + x, box.y + y(biggest.latitude) - y(answer.bbox[3]!));
    await sleep(4000);
  }
  throw new Error('the map never showed single machines');
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
  const verdicts: Array<[string, boolean]> = [];
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
          'page-fleet': '.map[data-marks]',
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
    verdicts.push(['weight', total <= WEIGHT_BUDGET]);

    const demo = await firstRender(browser, started.consoleUrl, started.tenantKey);
    const demoAnswer = await fetchedAlone(started.apiUrl, '/telemetry/data-quality', started.tenantKey);
    printRender('demo', demo, RENDER_BUDGET_MS, demoAnswer.ms);
    verdicts.push(['demo first render', median(demo.cold) <= RENDER_BUDGET_MS]);

    // The large tenant, in the same Gantry.
    log(`provisioning ${MACHINES.toLocaleString('en-US')} machines through the admin API (${load()})`);
    const admin = (path: string, init: { method: string; headers?: Record<string, string>; body: string }) =>
      fetch(`${started.adminUrl}${path}`, {
        ...init,
        headers: { ...init.headers, Authorization: `Bearer ${ADMIN_TOKEN}` },
      });
    let began = performance.now();
    const fleet = await provisionLargeFleet(admin, MACHINES, `bench-${Date.now().toString(36)}`);
    log(`  imported in ${((performance.now() - began) / 1000).toFixed(1)} s (${load()})`);
    began = performance.now();
    const published = await publishLargeFleet(started.mqttUrl, fleet.machines);
    const get = async (path: string) => {
      const response = await fetch(`${started.apiUrl}${path}`, { headers: { 'X-API-Key': fleet.tenantKey } });
      return response.json();
    };
    await waitForLargeFleet(get, fleet, 300_000);
    log(
      `  ${published.toLocaleString('en-US')} messages published and ingested in ${((performance.now() - began) / 1000).toFixed(1)} s ` +
        `(${fleet.counts.never_heard} machines never heard from, ${fleet.counts.errors} with errors, ${fleet.counts.poor_gps} with poor GPS) (${load()})`,
    );

    const large = await firstRender(browser, started.consoleUrl, fleet.tenantKey);
    const attention = '/telemetry/data-quality?status=errors,offline,silent,poor_gps,delayed&limit=100';
    const pageAnswer = await fetchedAlone(started.apiUrl, attention, fleet.tenantKey);
    printRender(`${MACHINES.toLocaleString('en-US')} machines:`, large, LARGE_RENDER_BUDGET_MS, pageAnswer.ms);
    verdicts.push(['large first render', median(large.cold) <= LARGE_RENDER_BUDGET_MS]);

    const refreshes = await qualityRefreshes(browser, started.consoleUrl, fleet.tenantKey, 4);
    const whole = await fetchedAlone(started.apiUrl, '/telemetry/data-quality', fleet.tenantKey, 3);
    log(
      `data-quality refreshes over the wire: ${refreshes.map(kb).join(', ')} (largest ${kb(Math.max(...refreshes))}); budget ${kb(REFRESH_BUDGET_BYTES)}; ` +
        `the page's answer from Node ${kb(pageAnswer.bytes)} in ${pageAnswer.ms.toFixed(0)} ms; baseline the whole report ${kb(whole.bytes)} in ${whole.ms.toFixed(0)} ms ` +
        `→ ratio ${(Math.max(...refreshes) / whole.bytes).toFixed(3)} (${load()})`,
    );
    verdicts.push(['data-quality refresh', refreshes.length > 0 && Math.max(...refreshes) <= REFRESH_BUDGET_BYTES]);

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addInitScript({ content: signedIn(fleet.tenantKey) });
    const page = await context.newPage();
    let lastMapQuery = '';
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname.endsWith('/telemetry/devices/clusters') && url.searchParams.has('bbox'))
        lastMapQuery = url.search;
    });
    await page.goto(`${started.consoleUrl}#/fleet`);
    await page.locator('.map[data-marks]').waitFor({ state: 'attached', timeout: 60_000 });
    await sleep(4000);
    const views: Array<[string, CycleFigures]> = [];
    views.push(['framed on the whole fleet', await updateCycles(page, started, fleet)]);
    await zoomIntoAYard(page, started, fleet.tenantKey, () => lastMapQuery);
    await sleep(4000);
    views.push(['zoomed in on a yard', await updateCycles(page, started, fleet)]);
    await context.close();
    for (const [label, figures] of views) {
      const list = (values: number[]) => values.map((value) => value.toFixed(0)).join(', ');
      log(
        `3-second update, ${label} (${figures.mode}: ${figures.shown} machines in view in ${figures.marks} marks): main-thread work per cycle ` +
          `median ${median(figures.cpu).toFixed(0)} ms CPU, worst ${Math.max(...figures.cpu).toFixed(0)} ms of ${figures.cpu.length} [${list(figures.cpu)}]; ` +
          `as wall time median ${median(figures.wall).toFixed(0)} ms, worst ${Math.max(...figures.wall).toFixed(0)} ms [${list(figures.wall)}]; ` +
          `budget ${UPDATE_BUDGET_MS} ms; the map's answers ${kb(median(figures.mapBytes))} each (${load()})`,
      );
      verdicts.push([`update ${label}`, Math.max(...figures.wall) <= UPDATE_BUDGET_MS]);
    }
    const clusters = await fetchedAlone(
      started.apiUrl,
      `/telemetry/devices/clusters${lastMapQuery}`,
      fleet.tenantKey,
      10,
    );
    const world = await fetchedAlone(started.apiUrl, '/telemetry/devices/clusters?zoom=3', fleet.tenantKey, 10);
    const devicePage = await fetchedAlone(started.apiUrl, '/telemetry/devices?limit=100', fleet.tenantKey, 10);
    const list = await fetchedAlone(started.apiUrl, '/telemetry/devices?limit=100&total=true', fleet.tenantKey, 10);
    log(
      `API from Node, median of 10: clusters of the whole fleet (zoom 3) ${world.ms.toFixed(1)} ms, ${kb(world.bytes)}; ` +
        `of the last view ${clusters.ms.toFixed(1)} ms, ${kb(clusters.bytes)}; the list's page (limit=100&total=true) ${list.ms.toFixed(1)} ms, ${kb(list.bytes)}; ` +
        `baseline a page of 100 devices ${devicePage.ms.toFixed(1)} ms, ${kb(devicePage.bytes)} (${load()})`,
    );
    let everyDevice = 0;
    let everyMs = 0;
    for (let offset = 0; offset < MACHINES; offset += 500) {
      const answer = await timedGet(started.apiUrl, `/telemetry/devices?limit=500&offset=${offset}`, fleet.tenantKey);
      everyDevice += answer.bytes;
      everyMs += answer.ms;
    }
    log(
      `  for comparison, every device page by page (what a map of DOM pins read every 3 s): ${kb(everyDevice)}, ${everyMs.toFixed(0)} ms of answers (${load()})`,
    );
    for (const [name, ok] of verdicts) if (!ok) log(`OVER BUDGET: ${name}`);
    const ok = verdicts.every(([, within]) => within);
    log(ok ? 'within every budget' : 'OVER BUDGET');
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
