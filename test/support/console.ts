import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { json, type TestApi } from './api.ts';

// The console's browser tests: Debian's Chromium through playwright-core, and what they
// read from the page to compare with the API's own answers.

export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

export interface ConsoleBrowser {
  /** Every URL the browser asked for. */
  requested: string[];
  /** Every error the browser logged (CSP violations included). */
  problems: string[];
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
  close(): Promise<void>;
}

/** Headless Chromium with a profile of its own (removed on close). */
export async function launchConsoleBrowser(): Promise<ConsoleBrowser> {
  const profile = mkdtempSync(path.join(tmpdir(), 'gantry-console-chromium-'));
  const context: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const requested: string[] = [];
  const problems: string[] = [];
  return {
    requested,
    problems,
    async newPage(viewport = { width: 1280, height: 800 }) {
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      page.on('request', (request) => requested.push(request.url()));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(error.message));
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function signIn(page: Page, baseUrl: string, key: string): Promise<void> {
  await page.goto(`${baseUrl}/console`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Pages' }).waitFor();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ApiGet = (pathAndQuery: string, key?: string) => Promise<any>;

/** GET on the external API with a key (the default key when none is given), expecting 200. */
export function apiReader(api: () => TestApi, defaultKey: () => string): ApiGet {
  return async (pathAndQuery, key = defaultKey()) => {
    const response = await api().external(pathAndQuery, key);
    const body = await json(response);
    expect(response.status, `${pathAndQuery}: ${JSON.stringify(body).slice(0, 300)}`).toBe(200);
    return body;
  };
}

/** Waits (hang guard) until the page holds `count` elements matching `selector`, or at least that many. */
export async function waitForCount(
  page: Page,
  selector: string,
  count: number,
  guardMs: number,
  atLeast = false,
): Promise<void> {
  const counted = expect.poll(() => page.locator(selector).count(), { timeout: guardMs, interval: 200 });
  if (atLeast) await counted.toBeGreaterThanOrEqual(count);
  else await counted.toBe(count);
}

/** The page's text rows of a table, cell by cell. */
export function tableRows(page: Page, selector: string): Promise<string[][]> {
  return page.$$eval(`${selector} tbody tr`, (rows) =>
    rows.map((row) => [...row.querySelectorAll('th, td')].map((cell) => cell.textContent?.trim() ?? '')),
  );
}

export const QUALITY_TABLE = '.page-quality section[aria-labelledby="quality-devices"] table';
/** The statuses the data-quality page shows by default: every one but ok and disabled. */
export const ATTENTION = 'status=errors,offline,silent,poor_gps,delayed';

type QualityRow = [deviceId: string, status: string, notes: string];

/** The device rows of the data-quality table as [device id, status, notes] (the "no device" row left out). */
export async function qualityRows(page: Page): Promise<QualityRow[]> {
  return (await tableRows(page, QUALITY_TABLE))
    .filter((row) => row.length === 8)
    .map((row) => [row[1]!, row[2]!, row[3]!]);
}

/** A data-quality answer's entries as the table shows them. */
function asRows(body: { assets: Array<{ deviceId: string; statusLabel: string; notes: string[] }> }): QualityRow[] {
  return body.assets.map((entry) => [
    entry.deviceId,
    entry.statusLabel,
    entry.notes.length ? entry.notes.join('; ') : '—',
  ]);
}

/**
 * Reads the table and the API's answer to `query` until they agree, row for row and in
 * order (statuses and notes change as a fleet lives, and the page refreshes every 5 s):
 * a hang guard, then the difference as the failure. Returns the rows.
 */
export async function expectQualityTable(
  page: Page,
  get: ApiGet,
  query: string,
  guardMs: number,
  key?: string,
): Promise<QualityRow[]> {
  const deadline = Date.now() + guardMs;
  for (;;) {
    const wanted = asRows(await get(`/telemetry/data-quality?${query}`, key));
    const shown = await qualityRows(page);
    if (JSON.stringify(shown) === JSON.stringify(wanted)) return shown;
    if (Date.now() > deadline) expect(shown).toEqual(wanted);
    await sleep(500);
  }
}

export interface MapRequest {
  /** Relative to /api/external/v1. */
  path: string;
  /** `?bbox=…&zoom=…` as the page sent it. */
  query: string;
  bbox: [number, number, number, number];
  zoom: number | null;
}

/** Records the map's requests for its marks (clusters, or machines by box), in order. */
export function mapRequests(page: Page): MapRequest[] {
  const seen: MapRequest[] = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    const bbox = url.searchParams.get('bbox');
    if (!bbox || !url.pathname.startsWith('/api/external/v1/telemetry/devices')) return;
    seen.push({
      path: url.pathname.replace('/api/external/v1', ''),
      query: url.search,
      bbox: bbox.split(',').map(Number) as MapRequest['bbox'],
      zoom: url.searchParams.has('zoom') ? Number(url.searchParams.get('zoom')) : null,
    });
  });
  return seen;
}

/** How many machines the canvas holds, in how many marks, and the map's accessible label. */
export async function mapShows(page: Page): Promise<{ mode: string; shown: number; marks: number; label: string }> {
  return page.$eval('.map', (map) => ({
    mode: map.getAttribute('data-mode') ?? '',
    shown: Number(map.getAttribute('data-shown') ?? -1),
    marks: Number(map.getAttribute('data-marks') ?? -1),
    label: map.getAttribute('aria-label') ?? '',
  }));
}

/**
 * Where a position lies in the map's box, in pixels from its top-left corner, at a zoom
 * (web mercator, 256-pixel tiles): what the page's own projection must agree with.
 */
export function pixelOf(
  [latitude, longitude]: [number, number],
  bbox: [number, number, number, number],
  zoom: number,
): { x: number; y: number } {
  const world = 256 * 2 ** zoom;
  const x = (lon: number) => ((lon + 180) / 360) * world;
  const y = (lat: number) => {
    const phi = (lat * Math.PI) / 180;
    return ((1 - Math.log(Math.tan(phi) + 1 / Math.cos(phi)) / Math.PI) / 2) * world;
  };
  return { x: x(longitude) - x(bbox[0]), y: y(latitude) - y(bbox[3]) };
}
