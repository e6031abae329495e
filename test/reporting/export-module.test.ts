import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@gantry/logger';
import { ValidationError } from '../../services/api/src/errors.ts';
import {
  EXPORT_MAX_ROWS,
  exportQueryParams,
  exportResponses,
  inlineParameters,
  sendExport,
  sqlLiteral,
} from '../../services/api/src/http/export.ts';
import { errorsAndAccessLog } from '../../services/api/src/http/middleware.ts';
import { defineRoute, RouteRegistry } from '../../services/api/src/http/route.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { hasSoffice, libreOfficeCsv, parseCsv, readXlsxRows } from './files.ts';

// The shared export module on its own: a tiny app with one export route over
// generate_series, so paging is checked on more than 50,000 rows without fixtures.

let db: TestDatabase;
let server: http.Server;
let baseUrl: string;
const TOTAL_ROWS = 2 * EXPORT_MAX_ROWS + 7;

const columns = [
  { name: 'n', type: 'integer' as const },
  { name: 'label' },
  { name: 'at', type: 'timestamp' as const },
  { name: 'ratio', type: 'number' as const },
  { name: 'even', type: 'boolean' as const },
  { name: 'payload', type: 'json' as const },
];

function seriesQuery(total: number, labelPrefix: string) {
  return {
    text: `/* test:series */
      SELECT g AS n,
             $2::text || g || ', "quoted"' || CASE WHEN g % 1000 = 0 THEN E'\\nsecond line' ELSE '' END AS label,
             timestamptz '2026-01-01T00:00:00Z' + g * interval '1 second' AS at,
             g / 4.0 AS ratio,
             g % 2 = 0 AS even,
             jsonb_build_object('g', g) AS payload,
             'not exported' AS secret
        FROM generate_series(1, $1::int) AS g
       ORDER BY g`,
    values: [total, labelPrefix],
  };
}

beforeAll(async () => {
  db = await createTestDatabase('export_module');
  const registry = new RouteRegistry();
  for (const format of ['csv', 'xlsx'] as const) {
    registry.add(
      defineRoute({
        method: 'get',
        base: 'root',
        path: `/series.${format}`,
        operationId: `series${format}`,
        summary: 'test export',
        tags: ['test'],
        auth: 'public',
        request: {
          query: z.object({
            ...exportQueryParams,
            total: z.coerce.number().int().min(0).default(TOTAL_ROWS),
            prefix: z.string().default('row '),
            /** A column to export that the query does not have. */
            missing: z.string().optional(),
          }),
        },
        responses: exportResponses(format),
        handler: async (ctx, { query }) => {
          await sendExport(ctx, db.pool, {
            format,
            filename: 'series export',
            columns: query.missing ? [...columns, { name: query.missing }] : columns,
            query: seriesQuery(query.total, query.prefix),
            offset: query.offset,
          });
        },
      }),
    );
  }
  const router = registry.router({ validateResponses: true, authenticate: async () => ({ kind: 'public' }) });
  const koa = new Koa();
  koa.silent = true;
  koa.use(errorsAndAccessLog(silentLogger()));
  koa.use(router.routes());
  server = http.createServer(koa.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await db?.drop();
});

async function activeExports(): Promise<number> {
  const { rows } = await db.pool.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%api:export%' AND pid <> pg_backend_pid()`,
  );
  return rows[0]?.count ?? 0;
}

describe('parameter inlining for COPY', () => {
  it('gives the same values as bind parameters for every kind of value, hostile text included', async () => {
    const values: unknown[] = [
      "O'Brien; DROP TABLE tenants; --",
      'back\\slash \\x00 and "double" quotes',
      'ünïcødé 港口 😀',
      -42,
      3.5,
      true,
      null,
      new Date('2026-03-04T05:06:07.089Z'),
      ['a', 'b,c', 'd"e', 'f\\g', "h'i"],
      { nested: ["x'y"] },
      '',
    ];
    const casts = [
      'text',
      'text',
      'text',
      'int',
      'numeric',
      'boolean',
      'text',
      'timestamptz',
      'text[]',
      'jsonb',
      'text',
    ];
    const select = `SELECT ${casts.map((cast, index) => `$${index + 1}::${cast} AS c${index}`).join(', ')}`;
    const bound = await db.pool.query(
      select,
      values.map((value) =>
        value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Date)
          ? JSON.stringify(value)
          : value,
      ),
    );
    const inlined = await db.pool.query(inlineParameters(select, values));
    expect(inlined.rows).toEqual(bound.rows);
    expect(inlined.rows[0].c0).toBe("O'Brien; DROP TABLE tenants; --");
    expect(inlined.rows[0].c8).toEqual(['a', 'b,c', 'd"e', 'f\\g', "h'i"]);
  });

  it('leaves strings, quoted identifiers, comments and dollar quotes alone', () => {
    const text = `SELECT '$1' AS "$1", $$ $1 $$, $tag$ $2 $tag$, E'\\' $1', a$1 /* $1 /* $2 */ */ -- $1\n, $1, $2`;
    expect(inlineParameters(text, ['x', 7])).toBe(
      `SELECT '$1' AS "$1", $$ $1 $$, $tag$ $2 $tag$, E'\\' $1', a$1 /* $1 /* $2 */ */ -- $1\n, 'x', (7)`,
    );
  });

  it('keeps a negative number from turning into a comment, refuses NUL and non-finite numbers', () => {
    expect(inlineParameters('SELECT 1 -$1', [-5])).toBe('SELECT 1 -(-5)');
    expect(() => sqlLiteral('a\u0000b')).toThrow(ValidationError);
    expect(() => sqlLiteral(Number.NaN)).toThrow(ValidationError);
    expect(() => inlineParameters('SELECT $2', [1])).toThrow(/\$2/);
  });
});

describe('CSV export', () => {
  it('pages through more than 50,000 rows with the X-Export headers, nothing missing or repeated', async () => {
    const seen: number[] = [];
    let offset = 0;
    const pages: Array<Record<string, string | null>> = [];
    for (;;) {
      const response = await fetch(`${baseUrl}/series.csv?offset=${offset}`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      const headers = {
        limit: response.headers.get('x-export-limit'),
        offset: response.headers.get('x-export-offset'),
        truncated: response.headers.get('x-export-truncated'),
        next: response.headers.get('x-next-offset'),
        disposition: response.headers.get('content-disposition'),
      };
      pages.push(headers);
      const rows = parseCsv(await response.text());
      expect(rows[0]).toEqual(['n', 'label', 'at', 'ratio', 'even', 'payload']);
      for (const row of rows.slice(1)) seen.push(Number(row[0]));
      if (headers.truncated !== 'true') break;
      offset = Number(headers.next);
    }
    expect(pages).toEqual([
      {
        limit: '50000',
        offset: '0',
        truncated: 'true',
        next: '50000',
        disposition: 'attachment; filename="series_export.csv"',
      },
      {
        limit: '50000',
        offset: '50000',
        truncated: 'true',
        next: '100000',
        disposition: 'attachment; filename="series_export-offset-50000.csv"',
      },
      {
        limit: '50000',
        offset: '100000',
        truncated: 'false',
        next: null,
        disposition: 'attachment; filename="series_export-offset-100000.csv"',
      },
    ]);
    expect(seen).toEqual(Array.from({ length: TOTAL_ROWS }, (_, index) => index + 1));
  });

  it('writes values as a reader expects: RFC 3339 UTC times, true/false, JSON text, quoted commas and newlines', async () => {
    const response = await fetch(`${baseUrl}/series.csv?total=1000&prefix=${encodeURIComponent("it's ")}`);
    const rows = parseCsv(await response.text());
    expect(rows).toHaveLength(1001);
    expect(rows[2]).toEqual([
      '2',
      `it's 2, "quoted"`,
      '2026-01-01T00:00:02.000Z',
      '0.50000000000000000000',
      'true',
      '{"g": 2}',
    ]);
    expect(rows[1000]?.[1]).toBe(`it's 1000, "quoted"\nsecond line`);
    expect(response.headers.get('x-export-truncated')).toBe('false');
    expect(response.headers.has('x-next-offset')).toBe(false);
  });

  it('answers an offset past the end with the header row only, and a bad offset with 400 before any byte', async () => {
    const past = await fetch(`${baseUrl}/series.csv?total=10&offset=10`);
    expect(past.status).toBe(200);
    expect(parseCsv(await past.text())).toEqual([['n', 'label', 'at', 'ratio', 'even', 'payload']]);
    expect(past.headers.get('x-export-truncated')).toBe('false');
    for (const bad of ['-1', 'abc', '1.5']) {
      const response = await fetch(`${baseUrl}/series.csv?offset=${bad}`);
      expect(response.status).toBe(400);
      expect(response.headers.get('content-type')).toContain('application/json');
      expect(((await response.json()) as { error: string }).error).toContain('offset');
    }
    const nul = await fetch(`${baseUrl}/series.csv?prefix=%00`);
    expect(nul.status).toBe(400);
  });

  it('answers a column the query lacks with a 500 before any byte, CSV and XLSX alike', async () => {
    for (const format of ['csv', 'xlsx']) {
      const response = await fetch(`${baseUrl}/series.${format}?missing=nope`);
      expect(response.status).toBe(500);
      expect(response.headers.get('content-type')).toContain('application/json');
      expect(response.headers.has('x-export-truncated')).toBe(false);
      await response.body?.cancel();
    }
    for (let attempt = 0; attempt < 100 && (await activeExports()) > 0; attempt += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await activeExports()).toBe(0);
  });

  it('gives the database connection back when the client goes away mid-stream', async () => {
    for (const format of ['csv', 'xlsx']) {
      const controller = new AbortController();
      const response = await fetch(`${baseUrl}/series.${format}`, { signal: controller.signal });
      const reader = response.body!.getReader();
      await reader.read();
      controller.abort();
      await reader.read().catch(() => undefined);
    }
    // The aborted exports' server processes end and the pool serves new exports.
    for (let attempt = 0; attempt < 100 && (await activeExports()) > 0; attempt += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await activeExports()).toBe(0);
    const again = await fetch(`${baseUrl}/series.csv?total=3`);
    expect(parseCsv(await again.text())).toHaveLength(4);
  });
});

describe('XLSX export', () => {
  it('pages like the CSV and holds the same rows, typed cells included', async () => {
    const csvRows = parseCsv(await (await fetch(`${baseUrl}/series.csv?offset=${EXPORT_MAX_ROWS * 2}`)).text());
    const response = await fetch(`${baseUrl}/series.xlsx?offset=${EXPORT_MAX_ROWS * 2}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe(
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    );
    expect(response.headers.get('x-export-truncated')).toBe('false');
    expect(response.headers.get('content-disposition')).toBe('attachment; filename="series_export-offset-100000.xlsx"');
    const rows = await readXlsxRows(await response.arrayBuffer());
    expect(rows).toHaveLength(8);
    expect(rows[0]).toEqual(csvRows[0]);
    // Numbers are numeric cells (ratio 100001/4), times are date cells.
    expect(rows[1]).toEqual([
      '100001',
      'row 100001, "quoted"',
      '2026-01-02T03:46:41.000Z',
      '25000.25',
      'false',
      '{"g": 100001}',
    ]);
    expect(rows.slice(1).map((row) => row[0])).toEqual(csvRows.slice(1).map((row) => row[0]));

    const first = await fetch(`${baseUrl}/series.xlsx`);
    expect(first.headers.get('x-export-truncated')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('50000');
    const firstRows = await readXlsxRows(await first.arrayBuffer());
    expect(firstRows).toHaveLength(EXPORT_MAX_ROWS + 1);
    expect(firstRows[EXPORT_MAX_ROWS]?.[0]).toBe('50000');
  }, 300_000); // two 50,000-row workbooks written and read back; generous for a shared machine (no timing is asserted)

  it('opens in LibreOffice (a real spreadsheet reader) with the same rows as the CSV', async (context) => {
    if (!(await hasSoffice())) {
      context.skip(
        'LibreOffice (soffice) is not installed: apt-get install -y libreoffice-calc-nogui to run this check',
      );
    }
    const query = `total=25&prefix=${encodeURIComponent('a,"b" ')}`;
    const csvRows = parseCsv(await (await fetch(`${baseUrl}/series.csv?${query}`)).text());
    const office = await libreOfficeCsv(await (await fetch(`${baseUrl}/series.xlsx?${query}`)).arrayBuffer());
    expect(office).toHaveLength(26);
    expect(office[0]).toEqual(csvRows[0]);
    for (let index = 1; index < office.length; index += 1) {
      const [n, label, at, ratio, even, payload] = office[index] as string[];
      const expected = csvRows[index] as string[];
      expect([n, label, even, payload]).toEqual([expected[0], expected[1], expected[4], expected[5]]);
      expect(at).toBe((expected[2] as string).replace('T', ' ').replace('Z', ''));
      expect(Number(ratio)).toBe(Number(expected[3]));
    }
  });
});
