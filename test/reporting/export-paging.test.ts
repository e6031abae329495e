import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';
import { parseCsv, readXlsxRows } from './files.ts';

// /reporting/export.* over more than 50,000 rows, followed page by page: nothing missing,
// nothing repeated, the same rows in CSV and XLSX, customer scope applied; and list pages
// deep into the offsets.

let db: TestDatabase;
let api: TestApi;
let tenant: TenantFixture;
const INSPECTIONS = 50_200;

beforeAll(async () => {
  db = await createTestDatabase('reporting_export_paging');
  api = await startTestApi(db.pool, db.url);
  tenant = await createTenantWithKeys(db.pool, ['Acme'], 'Export paging');
  // Bulk load with triggers off, then the reporting rebuild and the asset refresh in the
  // same transaction: the documented path for bulk loads (docs/reporting.md).
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query(
      `INSERT INTO assets (tenant_id, name, identifier, customer_name)
       SELECT $1, 'Asset ' || g, 'EX-' || g, CASE WHEN g % 2 = 0 THEN 'Acme' ELSE 'Beta' END FROM generate_series(1, 500) g`,
      [tenant.tenantId],
    );
    // Every tenth inspection has two reports, five in ten have one, four have none: 55,220 rows.
    await client.query(
      `INSERT INTO inspections (tenant_id, asset_id, status, completed_at, created_at, operator_identifier)
       SELECT $1, a.id, CASE WHEN g % 10 = 3 THEN 'rejected' ELSE 'completed' END, t.at, t.at, 'OP-' || g
         FROM generate_series(1, $2::int) g
         -- One in ten shares its hour's first minute with others: ties broken by id.
         CROSS JOIN LATERAL (SELECT CASE WHEN g % 10 = 7 THEN date_trunc('hour', timestamptz '2026-01-01' + g * interval '7 minutes')
                                         ELSE timestamptz '2026-01-01' + g * interval '7 minutes' END AS at) t
         JOIN (SELECT id, row_number() OVER (ORDER BY identifier) - 1 AS n FROM assets WHERE tenant_id = $1) a ON a.n = g % 500`,
      [tenant.tenantId, INSPECTIONS],
    );
    await client.query(
      `INSERT INTO reports (tenant_id, inspection_id, asset_id, outcome, created_at, impact)
       SELECT i.tenant_id, i.id, i.asset_id, 'completed', i.occurred_at + k * interval '1 minute',
              CASE WHEN k = 2 OR substr(i.operator_identifier, length(i.operator_identifier)) = '1' THEN 'warning' ELSE 'none' END
         FROM inspections i
         CROSS JOIN generate_series(1, 2) k
        WHERE i.tenant_id = $1
          AND (k = 1 AND substr(i.operator_identifier, length(i.operator_identifier)) IN ('0', '1', '2', '3', '4', '5')
               OR k = 2 AND substr(i.operator_identifier, length(i.operator_identifier)) = '0')`,
      [tenant.tenantId],
    );
    await client.query('SELECT reporting_rebuild($1)', [tenant.tenantId]);
    await client.query('SELECT refresh_asset_reporting_fields(id) FROM assets WHERE tenant_id = $1', [tenant.tenantId]);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  await db.pool.query('ANALYZE assets, inspections, reports');
});

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

async function expectedPairs(customerName: string | null): Promise<string[]> {
  const { rows } = await db.pool.query<{ pair: string }>(
    `SELECT i.id || '/' || coalesce(r.id::text, '') AS pair
       FROM inspections i JOIN assets a ON a.id = i.asset_id LEFT JOIN reports r ON r.inspection_id = i.id
      WHERE i.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
      ORDER BY i.occurred_at, i.id DESC, r.created_at NULLS FIRST, r.id NULLS FIRST`,
    [tenant.tenantId, customerName],
  );
  return rows.map((row) => row.pair);
}

async function followPages(path: string, key: string) {
  const pairs: string[] = [];
  const pages: Array<{ offset: string | null; truncated: string | null; next: string | null; rows: number }> = [];
  let offset = 0;
  for (;;) {
    const response = await api.external(`${path}${path.includes('?') ? '&' : '?'}offset=${offset}`, key);
    expect(response.status).toBe(200);
    const rows = parseCsv(await response.text()).slice(1);
    pages.push({
      offset: response.headers.get('x-export-offset'),
      truncated: response.headers.get('x-export-truncated'),
      next: response.headers.get('x-next-offset'),
      rows: rows.length,
    });
    for (const row of rows) pairs.push(`${row[0]}/${row[17]}`);
    if (response.headers.get('x-export-truncated') !== 'true') return { pairs, pages };
    offset = Number(response.headers.get('x-next-offset'));
  }
}

describe('reporting export paging', () => {
  it('follows X-Next-Offset through every row of the tenant exactly once', async () => {
    const expected = await expectedPairs(null);
    expect(expected).toHaveLength(55_220);
    const { pairs, pages } = await followPages('/reporting/export.csv', tenant.tenantKey);
    expect(pages).toEqual([
      { offset: '0', truncated: 'true', next: '50000', rows: 50_000 },
      { offset: '50000', truncated: 'false', next: null, rows: 5_220 },
    ]);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(pairs).toEqual(expected);
  });

  it('pages a customer key through its own rows only', async () => {
    const expected = await expectedPairs('Acme');
    const { pairs, pages } = await followPages(
      '/reporting/export.csv?from=2026-01-01',
      tenant.customerKeys.Acme as string,
    );
    expect(pages.map((page) => page.truncated)).toEqual(['false']);
    expect(pairs).toEqual(expected);
  });

  it('holds the same rows in the XLSX page as in the CSV page', async () => {
    const csv = parseCsv(await (await api.external('/reporting/export.csv?offset=50000', tenant.tenantKey)).text());
    const response = await api.external('/reporting/export.xlsx?offset=50000', tenant.tenantKey);
    expect(response.headers.get('x-export-offset')).toBe('50000');
    expect(response.headers.get('x-export-truncated')).toBe('false');
    expect(await readXlsxRows(await response.arrayBuffer())).toEqual(csv);
    const first = await api.external('/reporting/export.xlsx', tenant.tenantKey);
    expect(first.headers.get('x-export-truncated')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('50000');
    await first.body?.cancel();
  });
});

describe('deep list pages', () => {
  // From offset 10,000 on, list pages skip whole days by the rollup counts; they must be
  // exactly the pages a plain ORDER BY … OFFSET gives, for every filter the skip handles.
  async function plainPage(
    table: 'inspections' | 'reports',
    where: string,
    values: unknown[],
    offset: number,
    limit: number,
  ): Promise<string[]> {
    const time = table === 'inspections' ? 'occurred_at' : 'created_at';
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT x.id FROM ${table} x WHERE x.tenant_id = $1 ${where} ORDER BY x.${time} DESC, x.id LIMIT ${limit} OFFSET ${offset}`,
      [tenant.tenantId, ...values],
    );
    return rows.map((row) => row.id);
  }

  it('gives the same inspection and report pages as a plain OFFSET, at any depth, range and scope', async () => {
    const cases: Array<[string, string, string, unknown[], number, number, string]> = [
      ['inspections', '', '', [], 10_000, 100, tenant.tenantKey],
      ['inspections', '', '', [], 31_337, 500, tenant.tenantKey],
      ['inspections', '', '', [], 50_150, 100, tenant.tenantKey],
      ['inspections', '', '', [], 50_200, 100, tenant.tenantKey],
      ['inspections', 'status=rejected', `AND x.status = 'rejected'`, [], 4_000, 50, tenant.tenantKey],
      ['inspections', 'status=completed', `AND x.status = 'completed'`, [], 20_011, 100, tenant.tenantKey],
      [
        'inspections',
        'from=2026-01-20T13:17:00Z&to=2026-07-01T05:00:00Z',
        `AND x.occurred_at >= '2026-01-20T13:17:00Z' AND x.occurred_at < '2026-07-01T05:00:00Z'`,
        [],
        12_345,
        100,
        tenant.tenantKey,
      ],
      [
        'inspections',
        'from=2026-02-01&to=2026-03-31',
        `AND x.occurred_at >= '2026-02-01' AND x.occurred_at < '2026-04-01'`,
        [],
        10_001,
        100,
        tenant.tenantKey,
      ],
      ['inspections', '', `AND x.customer_name = 'Acme'`, [], 10_050, 200, tenant.customerKeys.Acme as string],
      ['reports', '', '', [], 10_000, 100, tenant.tenantKey],
      ['reports', '', '', [], 35_100, 100, tenant.tenantKey],
      ['reports', 'impact=warning', `AND x.impact = 'warning'`, [], 10_000, 100, tenant.tenantKey],
      [
        'reports',
        'from=2026-02-03T08:00:00Z',
        `AND x.created_at >= '2026-02-03T08:00:00Z'`,
        [],
        15_000,
        100,
        tenant.tenantKey,
      ],
      [
        'reports',
        'outcome=completed',
        `AND x.outcome = 'completed' AND x.customer_name = 'Acme'`,
        [],
        10_500,
        100,
        tenant.customerKeys.Acme as string,
      ],
    ];
    for (const [table, query, where, values, offset, limit, key] of cases) {
      const response = await api.external(`/reporting/${table}?${query}&offset=${offset}&limit=${limit}`, key);
      const body = (await response.json()) as { items: Array<{ id: string }> };
      expect(response.status).toBe(200);
      const expected = await plainPage(table as 'inspections' | 'reports', where, values, offset, limit);
      expect(
        body.items.map((item) => item.id),
        `${table}?${query} offset ${offset}`,
      ).toEqual(expected);
    }
  });
});
