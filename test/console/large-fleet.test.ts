import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../support/api.ts';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import {
  apiReader,
  ATTENTION,
  type ConsoleBrowser,
  expectQualityTable,
  hasChromium,
  launchConsoleBrowser,
  type MapRequest,
  mapRequests,
  mapShows,
  pixelOf,
  QUALITY_TABLE,
  signIn,
} from '../support/console.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startTestIngest, type TestIngest } from '../support/ingest.ts';
import { type LargeFleet, provisionLargeFleet, publishLargeFleet, waitForLargeFleet } from '../support/large-fleet.ts';

// The console against a tenant of 10,000 machines: imported from one file through the
// admin API, one GPS fix each (and some bad data) through a real broker into ingest. The
// pages ask for what they show, never for the whole fleet; every figure checked here is
// the API's own answer in the same test. Waits are hang guards.

const SIZE = 10_000;
const GUARD_MS = 120_000;
const TEST_TIMEOUT_MS = GUARD_MS + 60_000;

let db: TestDatabase;
let broker: TestBroker;
let api: TestApi;
let ingest: TestIngest;
let fleet: LargeFleet;
let chromium: ConsoleBrowser | undefined;
const apiGet = apiReader(
  () => api,
  () => fleet.tenantKey,
);

beforeAll(async () => {
  db = await createTestDatabase('console_large_fleet');
  broker = await startTestBroker();
  api = await startTestApi(db.pool, db.url);
  ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url });
  fleet = await provisionLargeFleet((path, init) => api.admin(path, init), SIZE, `lf-${Date.now().toString(36)}`);
  await publishLargeFleet(broker.url, fleet.machines);
  await waitForLargeFleet((path) => apiGet(path), fleet, GUARD_MS);
  if (hasChromium) chromium = await launchConsoleBrowser();
}, TEST_TIMEOUT_MS + GUARD_MS);

afterAll(async () => {
  await chromium?.close();
  await ingest?.stop();
  await api?.close();
  await broker?.stop();
  await db?.drop();
});

/** The text of the pager above a list ("1–100 of 455 devices"). */
const pagerText = (page: Page, scope: string) => page.locator(`${scope} .pager-range`).textContent();
const thousands = (n: number) => n.toLocaleString('en-US');

/** The device ids of the fleet list, in order. */
const listedIds = (page: Page) =>
  page.$$eval('.device-row', (rows) => rows.map((row) => row.getAttribute('data-device-id') ?? ''));

/** The list shows the API's answer to `query` (ids in order), checked until they agree (hang guard). */
async function expectFleetList(page: Page, query: string): Promise<string[]> {
  const wanted = (await apiGet(`/telemetry/devices?${query}`)).items.map((item: { deviceId: string }) => item.deviceId);
  await expect.poll(() => listedIds(page), { timeout: GUARD_MS, interval: 200 }).toEqual(wanted);
  return wanted;
}

/**
 * Waits until the map's requests pause (it asks again at once for a new view, then every
 * 3 s) with a last one `accept` takes, and returns it.
 */
async function settledView(page: Page, asked: MapRequest[], accept: (request: MapRequest) => boolean = () => true) {
  let last: MapRequest | undefined;
  await expect
    .poll(
      async () => {
        const seen = asked.length;
        await page.waitForTimeout(400);
        last = asked.at(-1);
        return seen === asked.length && last !== undefined && accept(last);
      },
      { timeout: GUARD_MS, interval: 100 },
    )
    .toBe(true);
  return last!;
}

describe.skipIf(!hasChromium)(`the console with ${thousands(SIZE)} machines`, () => {
  it(
    'data quality shows a page of 100 of the machines needing attention as the API lists them, pages on, and search finds one machine',
    async () => {
      const page = await chromium!.newPage();
      await signIn(page, api.url, fleet.tenantKey);
      await page.locator(`${QUALITY_TABLE} tbody tr`).first().waitFor();
      const first = await expectQualityTable(page, apiGet, `${ATTENTION}&limit=100`, GUARD_MS);
      expect(first).toHaveLength(100);
      const answer = await apiGet(`/telemetry/data-quality?${ATTENTION}&limit=100`);
      expect(answer.paging.total).toBe(fleet.counts.never_heard + fleet.counts.errors + fleet.counts.poor_gps);
      expect(await pagerText(page, '.page-quality')).toBe(`1–100 of ${answer.paging.total} devices`);
      // The filter buttons count from the summary.
      expect(await page.locator('.filters button[data-filter="errors"]').textContent()).toContain(
        String(answer.summary.errorAssets),
      );

      await page.getByRole('button', { name: 'Next →' }).first().click();
      const second = await expectQualityTable(page, apiGet, `${ATTENTION}&limit=100&offset=100`, GUARD_MS);
      expect(second).toHaveLength(100);
      expect(second.map((row) => row[0])).not.toContain(first[0]![0]);
      expect(await pagerText(page, '.page-quality')).toBe(`101–200 of ${answer.paging.total} devices`);

      // One status at a time.
      await page.locator('.filters button[data-filter="poor_gps"]').click();
      const poor = await expectQualityTable(page, apiGet, 'status=poor_gps&limit=100', GUARD_MS);
      expect(poor).toHaveLength(fleet.counts.poor_gps);
      expect(new Set(poor.map((row) => row[1]))).toEqual(new Set(['Poor GPS']));

      // Search over all 10,000: one machine that is fine, by its identifier.
      await page.locator('.filters button[data-filter="all"]').click();
      const fine = fleet.machines.find((machine) => machine.behaviour === 'ok' && machine.index > 5000)!;
      await page.getByLabel('Search devices by name, identifier or device id').fill(fine.identifier);
      const found = await expectQualityTable(page, apiGet, `q=${fine.identifier}&limit=100`, GUARD_MS);
      expect(found.map((row) => row[0])).toEqual([fine.deviceId]);
      await page.close();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'the map shows every machine in clusters whose counts are the API’s; a cluster click zooms in to its machines',
    async () => {
      const page = await chromium!.newPage();
      const asked = mapRequests(page);
      await signIn(page, api.url, fleet.tenantKey);
      await page.goto(`${api.url}/console#/fleet`);
      const world = await apiGet('/telemetry/devices/clusters?zoom=0');
      await expect
        .poll(async () => (await mapShows(page)).shown, { timeout: GUARD_MS, interval: 200 })
        .toBe(world.total);
      const view = await settledView(page, asked);
      expect(view.path).toBe('/telemetry/devices/clusters');
      // The API's answer to the page's own question: what the canvas holds.
      const answer = await apiGet(`${view.path}${view.query}`);
      const shows = await mapShows(page);
      expect(shows).toMatchObject({ mode: 'clusters', shown: answer.total, marks: answer.cells.length });
      expect(answer.cells.reduce((sum: number, cell: { count: number }) => sum + cell.count, 0)).toBe(world.total);
      expect(shows.label).toContain(`${thousands(world.total)} machines in view`);

      // The biggest cluster is drawn where the API puts it: its disc's dark centre on the canvas.
      const biggest = answer.cells.reduce((a: { count: number }, b: { count: number }) => (b.count > a.count ? b : a));
      const at = pixelOf([biggest.latitude, biggest.longitude], view.bbox, view.zoom!);
      const pixel = await page.$eval(
        'canvas.machine-canvas',
        (canvas, { x, y }) => {
          const map = canvas.closest('.map')!.getBoundingClientRect();
          const box = canvas.getBoundingClientRect();
          const ratio = canvas.width / box.width;
          // 12 px below the centre: inside the disc, clear of the count written in it.
          const data = canvas
            .getContext('2d')!
            .getImageData(
              Math.round((map.left + x - box.left) * ratio),
              Math.round((map.top + y + 12 - box.top) * ratio),
              1,
              1,
            ).data;
          return [...data];
        },
        at,
      );
      expect(pixel.slice(0, 3)).toEqual([13, 27, 42]);

      // Clicking it zooms in to the box around its machines.
      const before = asked.length;
      const map = (await page.locator('.map').boundingBox())!;
      await page.mouse.click(map.x + at.x, map.y + at.y);
      await expect.poll(() => asked.length, { timeout: GUARD_MS }).toBeGreaterThan(before);
      const zoomed = await settledView(page, asked, (request) => request.bbox.join() !== view.bbox.join());
      // A new view is asked for in clusters first (then, were few in view, the machines themselves).
      const zoom = asked
        .filter((request) => request.zoom !== null && request.bbox.join() === zoomed.bbox.join())
        .at(-1)!.zoom!;
      expect(zoom).toBeGreaterThan(view.zoom!);
      const [west, south, east, north] = zoomed.bbox;
      expect(west).toBeLessThanOrEqual(biggest.bbox[0]);
      expect(south).toBeLessThanOrEqual(biggest.bbox[1]);
      expect(east).toBeGreaterThanOrEqual(biggest.bbox[2]);
      expect(north).toBeGreaterThanOrEqual(biggest.bbox[3]);
      const inView = await apiGet(`/telemetry/devices/clusters?bbox=${zoomed.bbox.join(',')}&zoom=${zoom}`);
      await expect.poll(async () => (await mapShows(page)).shown, { timeout: GUARD_MS }).toBe(inView.total);
      expect(inView.total).toBeGreaterThanOrEqual(biggest.count);
      expect(inView.total).toBeLessThan(world.total);
      await page.close();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'the fleet list is paged and searchable through the API, and a machine found there is picked and highlighted where the API places it',
    async () => {
      const page = await chromium!.newPage();
      const asked = mapRequests(page);
      await signIn(page, api.url, fleet.tenantKey);
      await page.goto(`${api.url}/console#/fleet`);
      const first = await expectFleetList(page, 'limit=100');
      expect(first).toHaveLength(100);
      const total = (await apiGet('/telemetry/devices?limit=1&total=true')).paging.total;
      expect(total).toBe(SIZE);
      expect(await pagerText(page, '.panel')).toBe(`1–100 of ${thousands(total)} machines`);
      expect(await page.locator('#fleet-list').textContent()).toContain(thousands(total));
      await page.locator('.panel').getByRole('button', { name: 'Next →' }).click();
      const second = await expectFleetList(page, 'limit=100&offset=100');
      expect(second[0]).not.toBe(first[0]);
      expect(await pagerText(page, '.panel')).toBe(`101–200 of ${thousands(total)} machines`);

      const machine = fleet.machines.find((candidate) => candidate.behaviour === 'ok' && candidate.index > 7000)!;
      await page.getByLabel('Search machines').fill(machine.identifier);
      expect(await expectFleetList(page, `q=${machine.identifier}&limit=100`)).toEqual([machine.deviceId]);
      await page.locator(`.device-row[data-device-id="${machine.deviceId}"]`).click();
      const [device] = (await apiGet(`/telemetry/devices?q=${machine.deviceId}`)).items;
      await page.locator('.detail').getByRole('heading', { name: device.assetName }).waitFor();
      const pin = page.locator(`.leaflet-marker-icon.pin-selected[data-device-id="${machine.deviceId}"]`);
      await pin.waitFor();
      // Brought into view if it was not, then at the API's position in the view the map asked for.
      const view = await settledView(page, asked, (request) => request.zoom !== null);
      const [west, south, east, north] = view.bbox;
      expect(device.longitude).toBeGreaterThanOrEqual(west);
      expect(device.longitude).toBeLessThanOrEqual(east);
      expect(device.latitude).toBeGreaterThanOrEqual(south);
      expect(device.latitude).toBeLessThanOrEqual(north);
      const expected = pixelOf([device.latitude, device.longitude], view.bbox, view.zoom!);
      const box = (await pin.boundingBox())!;
      const map = (await page.locator('.map').boundingBox())!;
      // The pin's dot is centred 8 px into its icon.
      expect(Math.abs(box.x + 8 - map.x - expected.x)).toBeLessThan(3);
      expect(Math.abs(box.y + 8 - map.y - expected.y)).toBeLessThan(3);
      await page.close();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a customer key’s map counts only its customer’s machines',
    async () => {
      const page = await chromium!.newPage();
      await signIn(page, api.url, fleet.customerKey);
      await page.goto(`${api.url}/console#/fleet`);
      const own = await apiGet('/telemetry/devices/clusters?zoom=0', fleet.customerKey);
      expect(own.total).toBe(
        fleet.machines.filter((m) => m.customerName === 'Customer 0' && m.latitude !== null).length,
      );
      await expect.poll(async () => (await mapShows(page)).shown, { timeout: GUARD_MS, interval: 200 }).toBe(own.total);
      const listed = await apiGet('/telemetry/devices?limit=1&total=true', fleet.customerKey);
      await page.locator('.panel .pager-range', { hasText: `of ${thousands(listed.paging.total)} machines` }).waitFor();
      await page.close();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'utilization’s asset picker finds an asset by typing, and the page then asks for that asset',
    async () => {
      const page = await chromium!.newPage();
      await signIn(page, api.url, fleet.tenantKey);
      await page.goto(`${api.url}/console#/usage`);
      const picker = page.getByRole('combobox', { name: 'Scope' });
      await picker.fill('Machine 0471');
      const found = await apiGet('/telemetry/devices?q=Machine%200471&limit=20');
      const names = found.items.map((item: { assetName: string }) => item.assetName);
      const options = page.getByRole('listbox', { name: 'Assets found' }).getByRole('option');
      await expect.poll(() => options.count(), { timeout: GUARD_MS }).toBe(names.length);
      expect(await options.locator('.strong').allTextContents()).toEqual(names);
      // The keyboard picks the second.
      const asks = page.waitForRequest(
        (request) =>
          request.url().includes(`/telemetry/utilization?`) &&
          request.url().includes(`assetId=${found.items[1].assetId}`),
      );
      await picker.press('ArrowDown');
      await picker.press('ArrowDown');
      await picker.press('Enter');
      await asks;
      expect(await picker.inputValue()).toBe(names[1]);
      await page.locator('.page-usage .page-head p', { hasText: names[1] }).waitFor();
      await page.close();
    },
    TEST_TIMEOUT_MS,
  );

  it('no request URL held a key, and the browser reported no error (no CSP violation)', () => {
    const { requested, problems } = chromium!;
    expect(requested.length).toBeGreaterThan(10);
    expect(requested.filter((url) => url.includes(fleet.tenantKey) || url.includes(fleet.customerKey))).toEqual([]);
    expect(problems).toEqual([]);
  });
});
