import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createFleet, insertDeviceState, minutesAgo, type Fleet } from './fixtures.ts';

// The fleet map's data: /telemetry/devices?bbox=… and /telemetry/devices/clusters. Every
// cluster is checked against the devices the list gives for the same box, so the two
// endpoints cannot disagree on what a box holds.

let db: TestDatabase;
let api: TestApi;
let fleet: Fleet;

/** Where each machine last was: two close together in Rotterdam, one 1.3 km away, others far apart. */
const positions: Record<string, { latitude: number; longitude: number; minutes: number }> = {
  'SC 01': { latitude: 51.95, longitude: 4.05, minutes: 2 },
  'SC 02': { latitude: 51.9505, longitude: 4.0508, minutes: 30 },
  'SC 03': { latitude: 51.96, longitude: 4.06, minutes: 25 * 60 },
  'SC 05': { latitude: 53.54, longitude: 9.94, minutes: 1 },
  'SC 06': { latitude: 1.26, longitude: 103.83, minutes: 1 },
  'SC 07': { latitude: -33.1, longitude: -179.5, minutes: 3 },
  'SC 08': { latitude: -33.2, longitude: 179.5, minutes: 3 },
};

beforeAll(async () => {
  db = await createTestDatabase('telemetry_device_map');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 01', 'Acme'],
    ['SC 02', 'Acme'],
    ['SC 03', 'Globex'],
    ['SC 04', 'Globex'],
    ['SC 05', 'Acme'],
    ['SC 06', 'Globex'],
    ['SC 07', 'Acme'],
    ['SC 08', 'Globex'],
  ]);
  for (const [name, { minutes, ...position }] of Object.entries(positions))
    await insertDeviceState(db.pool, fleet.tenantId, fleet.byName[name]!, {
      lastSeenAt: minutesAgo(minutes),
      ...position,
    });
  // Heard from, but never with a position: on no map.
  await insertDeviceState(db.pool, fleet.tenantId, fleet.byName['SC 04']!, { lastSeenAt: minutesAgo(1) });
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function get(path: string, key = fleet.tenantKey): Promise<any> {
  const response = await api.external(path, key);
  const body = await json(response);
  expect(response.status, `${path}: ${JSON.stringify(body)}`).toBe(200);
  return body;
}

const names = (body: { items: Array<{ assetName: string }> }) => body.items.map((item) => item.assetName).sort();

interface Cell {
  count: number;
  latitude: number;
  longitude: number;
  bbox: number[];
  onlineStatusCounts: Record<string, number>;
  device: { id: string; deviceId: string; assetId: string; assetName: string; onlineStatus: string } | null;
}

/** Every cell holds exactly the devices the list finds in the cell's box, with the same statuses. */
async function expectCellsMatchTheList(cells: Cell[], key: string, filter = ''): Promise<void> {
  for (const cell of cells) {
    const listed = await get(`/telemetry/devices?bbox=${cell.bbox.join(',')}&limit=500${filter}`, key);
    expect(listed.items.length).toBe(cell.count);
    const statuses: Record<string, number> = { online: 0, silent: 0, offline: 0, unknown: 0, disabled: 0 };
    for (const item of listed.items) statuses[item.onlineStatus] = (statuses[item.onlineStatus] ?? 0) + 1;
    expect(cell.onlineStatusCounts).toEqual(statuses);
    const mean = (pick: (item: { latitude: number; longitude: number }) => number) =>
      listed.items.reduce((sum: number, item: never) => sum + pick(item), 0) / listed.items.length;
    expect(cell.latitude).toBeCloseTo(
      mean((item) => item.latitude),
      9,
    );
    expect(cell.longitude).toBeCloseTo(
      mean((item) => item.longitude),
      9,
    );
    if (cell.count === 1) {
      const [device] = listed.items;
      expect(cell.device).toEqual({
        id: device.id,
        deviceId: device.deviceId,
        assetId: device.assetId,
        assetName: device.assetName,
        assetDisplayCode: device.assetDisplayCode,
        onlineStatus: device.onlineStatus,
      });
    } else {
      expect(cell.device).toBeNull();
    }
  }
}

describe('GET /telemetry/devices?bbox=…', () => {
  it('lists only the devices whose last position lies in the box, edges included', async () => {
    expect(names(await get('/telemetry/devices?bbox=4.0,51.9,4.1,52.0'))).toEqual(['SC 01', 'SC 02', 'SC 03']);
    expect(names(await get('/telemetry/devices?bbox=4.05,51.95,4.0508,51.9505'))).toEqual(['SC 01', 'SC 02']);
    // The whole world holds every device with a position, and not SC 04, which has none.
    expect(names(await get('/telemetry/devices?bbox=-180,-90,180,90'))).toEqual(Object.keys(positions).sort());
    // Filters and the box together.
    expect(names(await get('/telemetry/devices?bbox=4.0,51.9,4.1,52.0&status=online'))).toEqual(['SC 01']);
  });

  it('takes a west edge east of the east edge as a box across the antimeridian', async () => {
    expect(names(await get('/telemetry/devices?bbox=179,-34,-179,-33'))).toEqual(['SC 07', 'SC 08']);
    expect(names(await get('/telemetry/devices?bbox=-179.9,-34,179.9,-33'))).toEqual(['SC 07', 'SC 08']);
    expect(names(await get('/telemetry/devices?bbox=179.9,-34,-179.9,-33'))).toEqual([]);
  });

  it('applies the customer scope', async () => {
    expect(names(await get('/telemetry/devices?bbox=-180,-90,180,90', fleet.acmeKey))).toEqual([
      'SC 01',
      'SC 02',
      'SC 05',
      'SC 07',
    ]);
  });

  it('with total=true counts the devices matching over every page, also past the last page', async () => {
    const all = await get('/telemetry/devices?limit=500');
    const first = await get('/telemetry/devices?limit=2&total=true');
    expect(first.paging).toEqual({ limit: 2, offset: 0, total: all.items.length });
    const beyond = await get('/telemetry/devices?limit=2&offset=100&total=true&bbox=4.0,51.9,4.1,52.0');
    expect(beyond.items).toEqual([]);
    expect(beyond.paging.total).toBe(3);
    expect((await get('/telemetry/devices?q=sc-05&total=true', fleet.acmeKey)).paging.total).toBe(1);
    expect((await get('/telemetry/devices?q=sc-06&total=true', fleet.acmeKey)).paging.total).toBe(0);
    // Without it the paging is the contract's.
    expect((await get('/telemetry/devices?limit=2')).paging).toEqual({ limit: 2, offset: 0 });
  });
});

describe('GET /telemetry/devices/clusters', () => {
  it('zoomed out, counts every device with a position, each cell as the list sees its box', async () => {
    const body = await get('/telemetry/devices/clusters?zoom=0');
    expect(body.bbox).toEqual([-180, -90, 180, 90]);
    expect(body.cellPixels).toBe(64);
    expect(body.total).toBe(Object.keys(positions).length);
    expect(body.cells.reduce((sum: number, cell: Cell) => sum + cell.count, 0)).toBe(body.total);
    // Zoom 0: a 4 × 4 grid; Rotterdam and Hamburg share a cell.
    const europe = body.cells.find((cell: Cell) => cell.count === 4);
    expect(europe.bbox).toEqual([4.05, 51.95, 9.94, 53.54]);
    expect(body.extent).toEqual([-179.5, -33.2, 179.5, 53.54]);
    await expectCellsMatchTheList(body.cells, fleet.tenantKey);
  });

  it('at a city’s zoom groups the two machines of a corner of the yard and leaves the third, 1.3 km off, alone', async () => {
    const body = await get('/telemetry/devices/clusters?zoom=12&bbox=3.9,51.8,4.2,52.1');
    expect(body.total).toBe(3);
    // At zoom 12 a cell is about 2.4 km across at 52° N, and SC 03 lies just over a cell edge, north.
    expect(body.cells.map((cell: Cell) => cell.count)).toEqual([1, 2]);
    expect(body.cells[0].device.assetName).toBe('SC 03');
    expect(body.cells[1]).toMatchObject({ device: null, onlineStatusCounts: { online: 1, silent: 1 } });
    expect(body.cells[1].latitude).toBeCloseTo((51.95 + 51.9505) / 2, 9);
    await expectCellsMatchTheList(body.cells, fleet.tenantKey);
  });

  it('zoomed in, every machine has a cell of its own that carries it', async () => {
    const body = await get('/telemetry/devices/clusters?zoom=20');
    expect(body.cells).toHaveLength(Object.keys(positions).length);
    expect(body.cells.every((cell: Cell) => cell.count === 1 && cell.device !== null)).toBe(true);
    expect(body.cells.map((cell: Cell) => cell.device!.assetName).sort()).toEqual(Object.keys(positions).sort());
    await expectCellsMatchTheList(body.cells, fleet.tenantKey);
    // North to south.
    const latitudes = body.cells.map((cell: Cell) => cell.latitude);
    expect(latitudes).toEqual([...latitudes].sort((a, b) => b - a));
  });

  it('counts across the antimeridian when the box wraps', async () => {
    const body = await get('/telemetry/devices/clusters?zoom=3&bbox=170,-40,-170,-30');
    expect(body.total).toBe(2);
    await expectCellsMatchTheList(body.cells, fleet.tenantKey);
  });

  it('applies the customer scope and the list’s filters', async () => {
    const acme = await get('/telemetry/devices/clusters?zoom=0', fleet.acmeKey);
    const acmeListed = await get('/telemetry/devices?bbox=-180,-90,180,90&limit=500', fleet.acmeKey);
    expect(acme.total).toBe(acmeListed.items.length);
    expect(acme.total).toBe(4);
    await expectCellsMatchTheList(acme.cells, fleet.acmeKey);
    const online = await get('/telemetry/devices/clusters?zoom=0&status=online');
    expect(online.total).toBe(5);
    await expectCellsMatchTheList(online.cells, fleet.tenantKey, '&status=online');
    const searched = await get('/telemetry/devices/clusters?zoom=5&q=sc-06');
    expect(searched.cells.map((cell: Cell) => cell.device?.assetName)).toEqual(['SC 06']);
    const other = await api.external(
      `/telemetry/devices/clusters?zoom=3&assetId=${fleet.byName['SC 03']!.id}`,
      fleet.acmeKey,
    );
    expect(other.status).toBe(404);
    expect((await json(other)).code).toBe('not_found');
  });

  it('an empty box answers no cells and no extent', async () => {
    const body = await get('/telemetry/devices/clusters?zoom=8&bbox=-60,-10,-50,0');
    expect(body).toMatchObject({ total: 0, extent: null, cells: [] });
  });

  it('answers 400 with the parameter named for bad input, on both endpoints', async () => {
    const bad = [
      ['/telemetry/devices/clusters', '', 'zoom'],
      ['/telemetry/devices/clusters', '?zoom=25', 'zoom'],
      ['/telemetry/devices/clusters', '?zoom=-1', 'zoom'],
      ['/telemetry/devices/clusters', '?zoom=1.5', 'zoom'],
      ['/telemetry/devices/clusters', '?zoom=near', 'zoom'],
      ['/telemetry/devices/clusters', '?zoom=3&bbox=1,2,3', 'bbox'],
      ['/telemetry/devices/clusters', '?zoom=3&bbox=a,b,c,d', 'bbox'],
      ['/telemetry/devices/clusters', '?zoom=3&bbox=181,0,182,1', 'bbox'],
      ['/telemetry/devices/clusters', '?zoom=3&bbox=0,10,1,5', 'bbox'],
      ['/telemetry/devices/clusters', '?zoom=3&bbox=0,-91,1,5', 'bbox'],
      ['/telemetry/devices/clusters', '?zoom=3&status=sleeping', 'status'],
      ['/telemetry/devices', '?bbox=0,0,1', 'bbox'],
      ['/telemetry/devices', '?bbox=0,0,1,1,2', 'bbox'],
      ['/telemetry/devices', '?bbox=1e3,0,1,1', 'bbox'],
      ['/telemetry/devices', '?bbox=', 'bbox'],
      ['/telemetry/devices', '?total=yes', 'total'],
    ] as const;
    for (const [path, query, parameter] of bad) {
      const response = await api.external(`${path}${query}`, fleet.tenantKey);
      const body = await json(response);
      expect(response.status, `${path}${query}`).toBe(400);
      expect(body.error, `${path}${query}`).toContain(`invalid query parameter ${parameter}`);
      expect(body.code).toBe('invalid_parameter');
    }
  });
});
