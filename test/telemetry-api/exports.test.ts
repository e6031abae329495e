import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { hasSoffice, libreOfficeCsv, parseCsv, readXlsxRows } from '../reporting/files.ts';
import {
  createFleet,
  createGeofence,
  insertAlert,
  insertDeviceState,
  insertIdentifierSession,
  insertReadings,
  insertSegments,
  insertServiceRequest,
  insertUsageSession,
  minutesAgo,
  type Fleet,
} from './fixtures.ts';
import { materializeGold } from './gold.ts';

const PAGE = 50_000;
const BIG_SESSIONS = 2 * PAGE + 5;
// Three pages of 50,000 rows each way; generous because the CI machine is shared (no timing is asserted).
const BIG_EXPORT_TIMEOUT_MS = 300_000;

let db: TestDatabase;
let api: TestApi;
let fleet: Fleet;
let bigFleet: Fleet;

beforeAll(async () => {
  db = await createTestDatabase('telemetry_exports');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 01', 'Acme'],
    ['SC 02', 'Acme'],
    ['SC 03', 'Globex'],
  ]);
  const t = fleet.tenantId;
  const { byName } = fleet;
  for (const asset of fleet.assets)
    await insertDeviceState(db.pool, t, asset, { lastSeenAt: minutesAgo(1), latitude: 51.9, longitude: 4 });
  await insertUsageSession(db.pool, t, byName['SC 01']!, {
    start: '2026-03-10T08:00:00Z',
    end: '2026-03-10T09:00:00Z',
    identifier: 'OP-1',
  });
  await insertUsageSession(db.pool, t, byName['SC 02']!, {
    start: '2026-03-10T10:00:00Z',
    end: '2026-03-10T11:00:00Z',
  });
  await insertUsageSession(db.pool, t, byName['SC 03']!, {
    start: '2026-03-10T12:00:00Z',
    end: '2026-03-10T13:00:00Z',
  });
  await insertIdentifierSession(db.pool, t, byName['SC 01']!, {
    identifier: 'OP-1',
    start: '2026-03-10T08:00:00Z',
    end: '2026-03-10T09:00:00Z',
  });
  const zone = await createGeofence(db.pool, t, 'Quay', 'forbidden');
  await insertAlert(db.pool, t, zone.id, byName['SC 01']!, { createdAt: '2026-03-10T08:30:00Z' });
  await insertAlert(db.pool, t, zone.id, byName['SC 03']!, { createdAt: '2026-03-10T09:30:00Z' });
  await insertServiceRequest(db.pool, t, {
    createdAt: '2026-03-10T08:10:00Z',
    priority: 'urgent',
    asset: byName['SC 01'],
  });
  await insertSegments(db.pool, t, byName['SC 01']!, [
    { start: '2026-03-10T08:00:00Z', seconds: 1800, moving: true, loaded: true, distanceM: 1500, cycles: 3 },
  ]);
  await insertSegments(db.pool, t, byName['SC 03']!, [{ start: '2026-03-10T09:00:00Z', seconds: 3600, distanceM: 0 }]);
  await insertReadings(db.pool, t, byName['SC 01']!, [
    { type: 'gps', ts: '2026-03-10T08:00:10Z', latitude: 51.91, longitude: 4.01 },
    { type: 'gps', ts: '2026-03-10T08:05:10Z', latitude: 51.92, longitude: 4.02 },
  ]);
  await materializeGold(db, ['positions_1min', 'positions_15min'], '2026-03-10T00:00:00Z', '2026-03-11T00:00:00Z');

  // A second tenant with more than two export pages of sessions and of utilization rows.
  bigFleet = await createFleet(
    db.pool,
    Array.from({ length: 24 }, (_, index): [string, string] => [
      `Big ${String(index + 1).padStart(2, '0')}`,
      index % 2 === 0 ? 'Acme' : 'Globex',
    ]),
    'Big tenant',
  );
  const first = bigFleet.assets[0]!;
  await db.pool.query(
    `INSERT INTO usage_sessions (id, tenant_id, device_id, asset_id, start_ts, end_ts, start_reason, end_reason, confidence, duration_seconds)
     SELECT gen_random_uuid(), $1, $2, $3, timestamptz '2026-01-01T00:00:00Z' + g * interval '1 minute',
            timestamptz '2026-01-01T00:00:30Z' + g * interval '1 minute', 'ignition_on', 'ignition_off', 1, 30
       FROM generate_series(0, $4::int - 1) AS g`,
    [bigFleet.tenantId, first.deviceUuid, first.id, BIG_SESSIONS],
  );
  await db.pool.query(
    `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, running, moving, loaded, seconds, distance_m)
     SELECT $1, d.id, d.asset_id, timestamptz '2026-01-01T00:00:00Z' + h * interval '1 hour',
            timestamptz '2026-01-01T00:30:00Z' + h * interval '1 hour', true, true, h % 2 = 0, 1800, 100
       FROM devices d, generate_series(0, 2199) AS h
      WHERE d.tenant_id = $1`,
    [bigFleet.tenantId],
  );
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

async function download(path: string, key = fleet.tenantKey) {
  const response = await api.external(path, key);
  const text = await response.text();
  expect(response.status, `${path}: ${text.slice(0, 300)}`).toBe(200);
  return { response, rows: parseCsv(text) };
}

const exports: Array<[string, string, number]> = [
  ['devices', '', 3],
  ['usage-sessions', 'from=2026-03-10&to=2026-03-10', 3],
  ['identifier-sessions', 'from=2026-03-10&to=2026-03-10', 1],
  ['operators', 'from=2026-03-10&to=2026-03-10', 1],
  ['geofence-alerts', 'from=2026-03-10&to=2026-03-10', 2],
  ['utilization', 'from=2026-03-10&to=2026-03-10&groupBy=asset', 2],
  ['container-work', 'from=2026-03-10&to=2026-03-10', 24],
  ['service-request-metrics', 'from=2026-03-10&to=2026-03-10&bucket=day', 1],
  ['positions', 'from=2026-03-10T08:00:00Z&to=2026-03-10T09:00:00Z', 2],
];

describe('telemetry exports', () => {
  it.each(exports)(
    '%s exports as CSV with a header row, the export headers and the rows of the list',
    async (name, query, rows) => {
      const positions = name === 'positions' ? `&assetId=${fleet.byName['SC 01']!.id}` : '';
      const { response, rows: csv } = await download(`/telemetry/${name}/export.csv?${query}${positions}`);
      expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      expect(response.headers.get('content-disposition')).toBe(`attachment; filename="telemetry-${name}.csv"`);
      expect(response.headers.get('x-export-limit')).toBe('50000');
      expect(response.headers.get('x-export-offset')).toBe('0');
      expect(response.headers.get('x-export-truncated')).toBe('false');
      expect(response.headers.get('x-next-offset')).toBeNull();
      expect(csv).toHaveLength(rows + 1);
    },
  );

  it.each(exports)('%s exports as XLSX with the same rows as the CSV', async (name, query) => {
    const positions = name === 'positions' ? `&assetId=${fleet.byName['SC 01']!.id}` : '';
    const { rows: csv } = await download(`/telemetry/${name}/export.csv?${query}${positions}`);
    const response = await api.external(`/telemetry/${name}/export.xlsx?${query}${positions}`, fleet.tenantKey);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe(
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    );
    expect(response.headers.get('x-export-truncated')).toBe('false');
    const sheet = await readXlsxRows(await response.arrayBuffer());
    expect(sheet[0]).toEqual(csv[0]);
    expect(sheet).toHaveLength(csv.length);
    // Same first column (ids, buckets or identifiers) in the same order.
    expect(sheet.slice(1).map((row) => row[0])).toEqual(csv.slice(1).map((row) => row[0]));
  });

  it('writes the list’s fields as columns, nested objects flattened', async () => {
    const { rows } = await download('/telemetry/usage-sessions/export.csv?from=2026-03-10&to=2026-03-10');
    const list = await json(
      await api.external('/telemetry/usage-sessions?from=2026-03-10&to=2026-03-10', fleet.tenantKey),
    );
    const header = rows[0]!;
    expect(header).toEqual([
      'id',
      'assetId',
      'assetIdentifier',
      'assetName',
      'assetDisplayCode',
      'assetType',
      'assetLocation',
      'assetCustomerName',
      'deviceId',
      'identifier',
      'operatorName',
      'startReason',
      'endReason',
      'startTs',
      'endTs',
      'confidence',
      'distanceM',
      'durationSeconds',
      'movingSeconds',
      'stationaryRunningSeconds',
      'stopCount',
      'tripCount',
      'imuAnomalyCount',
      'imuSampleCount',
      'hourmeterDelta',
      'containerCycleCount',
      'loadedSeconds',
      'emptySeconds',
      'loadedDistanceM',
      'emptyDistanceM',
      'loadedPercent',
    ]);
    const record = Object.fromEntries(header.map((column, index) => [column, rows[1]![index]]));
    const item = list.items[0];
    expect(record).toMatchObject({
      id: item.id,
      assetName: item.asset.name,
      deviceId: item.deviceId,
      startTs: item.startTs,
      endTs: item.endTs,
      durationSeconds: String(item.durationSeconds),
      loadedPercent: String(item.containerWork.loadedPercent),
    });
    expect(rows.slice(1).map((row) => row[0])).toEqual(list.items.map((entry: any) => entry.id));

    const utilization = await download('/telemetry/utilization/export.csv?from=2026-03-10&to=2026-03-10&groupBy=asset');
    const utilizationList = await json(
      await api.external('/telemetry/utilization?from=2026-03-10&to=2026-03-10&groupBy=asset', fleet.tenantKey),
    );
    const utilizationHeader = utilization.rows[0]!;
    const first = Object.fromEntries(utilizationHeader.map((column, index) => [column, utilization.rows[1]![index]]));
    const firstItem = utilizationList.items[0];
    expect(first).toMatchObject({
      bucketStart: firstItem.bucketStart,
      groupType: 'asset',
      assetName: firstItem.asset.name,
      runningSeconds: String(firstItem.runningSeconds),
      utilizationPercent: String(firstItem.utilizationPercent),
      containerWorkContainerCycleCount: String(firstItem.containerWork.containerCycleCount),
    });
  });

  it('writes utilization and container work with exactly the figures of the JSON items, per asset and fleet, hour and day', async () => {
    // A day of its own with figures that need rounding (fractions of seconds and metres).
    const t = fleet.tenantId;
    await insertSegments(db.pool, t, fleet.byName['SC 01']!, [
      {
        start: '2026-03-12T06:00:00Z',
        seconds: 1234.5678,
        moving: true,
        loaded: true,
        distanceM: 1000.0005,
        cycles: 7,
      },
      { start: '2026-03-12T06:30:00Z', seconds: 777.7777, distanceM: 0.0125, hourmeterDelta: 0.3335 },
      { start: '2026-03-12T13:00:00Z', seconds: 333.3333, moving: true, distanceM: 12.3456 },
    ]);
    await insertSegments(db.pool, t, fleet.byName['SC 02']!, [
      { start: '2026-03-12T06:10:00Z', seconds: 100.005, moving: true, loaded: true, distanceM: 2.0015, cycles: 1 },
      { start: '2026-03-12T06:40:00Z', seconds: 1000 / 3, moving: true, distanceM: 1 / 3 },
    ]);
    const assetFields: Record<string, string> = {
      assetId: 'id',
      assetIdentifier: 'identifier',
      assetName: 'name',
      assetDisplayCode: 'displayCode',
      assetType: 'assetType',
      assetLocation: 'location',
      assetCustomerName: 'customerName',
    };
    let compared = 0;
    for (const metric of ['utilization', 'container-work']) {
      for (const groupBy of ['asset', 'fleet']) {
        for (const bucket of ['hour', 'day']) {
          const query = `from=2026-03-12&to=2026-03-12&groupBy=${groupBy}&bucket=${bucket}`;
          const { rows } = await download(`/telemetry/${metric}/export.csv?${query}`);
          const list = await json(await api.external(`/telemetry/${metric}?${query}&limit=500`, fleet.tenantKey));
          const header = rows[0]!;
          expect(rows.slice(1)).toHaveLength(list.items.length);
          expect(list.items.length).toBeGreaterThan(0);
          list.items.forEach((item: Record<string, any>, index: number) => {
            const expected = header.map((column) => {
              let value: unknown;
              if (column in assetFields) value = item.asset?.[assetFields[column]!];
              else if (column.startsWith('containerWork') && item.containerWork)
                value = item.containerWork[column[13]!.toLowerCase() + column.slice(14)];
              else value = item[column];
              return value === null || value === undefined ? '' : String(value);
            });
            expect(rows[index + 1], `${metric} ${groupBy} ${bucket} row ${index}`).toEqual(expected);
            compared += 1;
          });
        }
      }
    }
    // Per metric: 3 asset-hours and 2 asset-days with data, 24 fleet hours and 1 fleet day.
    expect(compared).toBe(2 * (3 + 2 + 24 + 1));
  });

  it('applies the key’s scope and the list’s filters, and refuses bad parameters before any byte', async () => {
    const acme = await download('/telemetry/usage-sessions/export.csv?from=2026-03-10&to=2026-03-10', fleet.acmeKey);
    expect(acme.rows.slice(1).map((row) => row[3])).toEqual(['SC 02', 'SC 01']);
    const alerts = await download(
      '/telemetry/geofence-alerts/export.csv?from=2026-03-10&to=2026-03-10',
      fleet.globexKey,
    );
    expect(alerts.rows.slice(1).map((row) => row[5])).toEqual(['SC 03']);
    const other = await api.external(
      `/telemetry/positions/export.csv?assetId=${fleet.byName['SC 03']!.id}`,
      fleet.acmeKey,
    );
    expect(other.status).toBe(404);
    for (const [path, expected] of [
      ['/telemetry/positions/export.csv', 'assetId'],
      ['/telemetry/usage-sessions/export.csv?offset=-1', 'offset'],
      ['/telemetry/utilization/export.xlsx?bucket=week', 'bucket'],
      ['/telemetry/geofence-alerts/export.csv?from=2026-03-11&to=2026-03-10', 'from must be before to'],
      ['/telemetry/devices/export.xlsx?status=awake', 'status'],
    ] as const) {
      const response = await api.external(path, fleet.tenantKey);
      expect(response.status, path).toBe(400);
      expect(response.headers.get('content-type')).toContain('application/json');
      expect((await json(response)).error, path).toContain(expected);
    }
  });

  it(
    'pages a usage-session export of more than 50,000 rows until X-Export-Truncated is false, with no row missing or repeated',
    async () => {
      const seen: string[] = [];
      let offset = 0;
      let pages = 0;
      for (;;) {
        const { response, rows } = await download(
          `/telemetry/usage-sessions/export.csv?from=2026-01-01&to=2026-04-30&offset=${offset}`,
          bigFleet.tenantKey,
        );
        pages += 1;
        expect(response.headers.get('x-export-offset')).toBe(String(offset));
        const body = rows.slice(1);
        seen.push(...body.map((row) => row[0]!));
        if (response.headers.get('x-export-truncated') === 'false') {
          expect(response.headers.get('x-next-offset')).toBeNull();
          expect(body).toHaveLength(BIG_SESSIONS - 2 * PAGE);
          break;
        }
        expect(body).toHaveLength(PAGE);
        expect(response.headers.get('x-next-offset')).toBe(String(offset + PAGE));
        offset = Number(response.headers.get('x-next-offset'));
      }
      expect(pages).toBe(3);
      expect(new Set(seen).size).toBe(BIG_SESSIONS);
      const { rows } = await db.pool.query<{ id: string }>(`SELECT id FROM usage_sessions WHERE tenant_id = $1`, [
        bigFleet.tenantId,
      ]);
      expect(new Set(rows.map((row) => row.id))).toEqual(new Set(seen));
    },
    BIG_EXPORT_TIMEOUT_MS,
  );

  it(
    'pages a per-asset utilization export of more than 50,000 rows the same way',
    async () => {
      const keys: string[] = [];
      let offset = 0;
      let truncated = 'true';
      while (truncated === 'true') {
        const { response, rows } = await download(
          `/telemetry/utilization/export.csv?from=2026-01-01&to=2026-04-02&groupBy=asset&offset=${offset}`,
          bigFleet.tenantKey,
        );
        expect(response.headers.get('x-export-offset')).toBe(String(offset));
        expect(response.headers.get('content-disposition')).toBe(
          `attachment; filename="telemetry-utilization${offset > 0 ? `-offset-${offset}` : ''}.csv"`,
        );
        const header = rows[0]!;
        const bucket = header.indexOf('bucketStart');
        const asset = header.indexOf('assetId');
        keys.push(...rows.slice(1).map((row) => `${row[bucket]}/${row[asset]}`));
        truncated = response.headers.get('x-export-truncated')!;
        if (truncated === 'true') {
          expect(rows).toHaveLength(PAGE + 1);
          offset = Number(response.headers.get('x-next-offset'));
        } else expect(response.headers.get('x-next-offset')).toBeNull();
      }
      expect(offset).toBe(PAGE);
      expect(keys).toHaveLength(24 * 2200);
      expect(new Set(keys).size).toBe(24 * 2200);
      expect([...keys].sort((a, b) => (a < b ? -1 : 1))).toEqual(keys);
    },
    BIG_EXPORT_TIMEOUT_MS,
  );

  it('writes XLSX files a real spreadsheet reader (LibreOffice) opens with the CSV’s rows', async (context) => {
    if (!(await hasSoffice()))
      context.skip('LibreOffice (soffice) is not installed: apt-get install -y libreoffice-calc-nogui');
    for (const path of ['/telemetry/usage-sessions/export', '/telemetry/utilization/export']) {
      const query = path.includes('utilization')
        ? '?from=2026-03-10&to=2026-03-10&groupBy=asset'
        : '?from=2026-03-10&to=2026-03-10';
      const { rows: csv } = await download(`${path}.csv${query}`);
      const xlsx = await api.external(`${path}.xlsx${query}`, fleet.tenantKey);
      const office = await libreOfficeCsv(await xlsx.arrayBuffer());
      expect(office).toHaveLength(csv.length);
      expect(office[0]).toEqual(csv[0]);
      const header = csv[0]!;
      for (let index = 1; index < csv.length; index += 1) {
        header.forEach((column, position) => {
          const expected = csv[index]![position]!;
          const actual = office[index]![position]!;
          if (/(Ts|At|bucketStart|bucketEnd)$/.test(column) && expected !== '') {
            expect(actual, column).toBe(expected.replace('T', ' ').replace('Z', ''));
          } else if (expected !== '' && !Number.isNaN(Number(expected)) && !/^[0-9a-f-]{36}$/.test(expected)) {
            expect(Number(actual), column).toBeCloseTo(Number(expected), 6);
          } else {
            expect(actual, column).toBe(expected);
          }
        });
      }
    }
  });
});
