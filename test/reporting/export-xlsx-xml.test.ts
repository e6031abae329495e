import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ExportColumn,
  type ExportRequest,
  inlineParameters,
  openWorkbook,
  sheetValuesWriter,
  startSheetXml,
  writeSheetXml,
  xlsxProjection,
  xlsxRowsStatement,
} from '../../services/api/src/http/export.ts';
import { CopyBinaryFields, jsNumberSql } from '../../services/api/src/http/xlsx-sql.ts';
import { sheetXmlWriter } from '../../services/api/src/http/xlsx-rows.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

// XLSX sheet rows rendered by PostgreSQL (services/api/src/http/xlsx-sql.ts) against
// exceljs' own renderer (the values path of export.ts), on the same statement.

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('export_xlsx_xml');
});

afterAll(async () => {
  await db?.drop();
});

const EMOJI = '\u{1F69C}';

/** Every kind of column the SQL renderer takes: declared type × PostgreSQL type. */
const columns: ExportColumn[] = [
  { name: 'label' },
  { name: 'n', type: 'number' },
  { name: 'at', type: 'timestamp' },
  { name: 'count', type: 'integer' },
  { name: 'ratio', type: 'number' },
  { name: 'flag', type: 'boolean' },
  { name: 'payload', type: 'json' },
  { name: 'id' },
  { name: 'small' },
  { name: 'big' },
  { name: 'dec' },
  { name: 'f4', type: 'number' },
  { name: 'yes' },
  { name: 'day', type: 'timestamp' },
];

/** Edge values, one row each; NULL elsewhere. Text through chr() so that no escaping of this file is involved. */
const rows: string[] = [
  `'first <&> "row"', 0.1::float8 + 0.2::float8, timestamptz '2026-03-04T05:06:07.089Z', 42::int8, 1.5::numeric, true, '{"a": "<b>"}'::jsonb, '7b0c7c4e-1a53-4e0e-9d5b-0c7c4e1a534e'::uuid, 7, 9007199254740993::int8, 1.10::numeric, 0.1::float4, false, date '2026-11-26'`,
  `'it' || chr(39) || 's ' || chr(233) || 't' || chr(233) || ' ' || chr(8211) || ' ' || chr(128668), 1e21::float8, timestamptz '1969-07-20T20:17:40Z', 9007199254740993::int8, 'NaN'::numeric, false, '[1, "x\\"y"]'::jsonb, NULL, -32768, -1, 'NaN'::numeric, 3.4e38::float4, true, date '1899-12-30'`,
  `'', -1e-6::float8, timestamptz '1900-01-01T00:00:00.001Z', 0::int8, 0.333333333333333333333333::numeric, NULL, 'null'::jsonb, NULL, 0, 0, 0::numeric, -0::float4, NULL, NULL`,
  `'  spaces' || chr(9) || 'and' || chr(10) || 'lines' || chr(13) || '  ', 1e-7::float8, timestamptz 'infinity', -5::int8, 1e-5::numeric, NULL, NULL, NULL, NULL, NULL, NULL, 1e-7::float4, NULL, NULL`,
  `'ctrl' || chr(1) || chr(8) || chr(11) || chr(12) || chr(31) || chr(127) || ' end ' || chr(65534) || chr(65535) || '!', 1e15::float8, timestamptz '-infinity', NULL, 123456789012345678901234567890::numeric, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `NULL, 123456789012345.6::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `NULL, 1234567890123456.7::float8, timestamptz '280000-01-01T00:00:00Z', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'x', 5e-324::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'y', '-0'::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'z', 'NaN'::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'w', '-Infinity'::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'v', 1e100::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'u', -2.5e-5::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  // Longer than a cell holds: cut to 32,767 UTF-16 units, one of them through an emoji's pair.
  `'a' || repeat(chr(128668), 16383), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `'ab' || repeat(chr(128668), 16383), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `repeat(chr(1), 10) || repeat('x', 32766) || chr(127) || 'yz' || repeat('<', 10), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
  `repeat('&', 20000), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
];

function statement(total = 1): ExportRequest['query'] {
  const names = columns.map((column) => `"${column.name}"`).join(', ');
  return {
    text: `/* test:edges */
      SELECT e.*, g AS copy_no FROM (VALUES ${rows.map((row, index) => `(${index}, ${row})`).join(',\n')}) AS e(k, ${names}),
             generate_series(1, $1::int) AS g
       ORDER BY g, e.k`,
    values: [total],
  };
}

/** A workbook's sheet XML as written to its stream, and the file. */
function capture(request: Pick<ExportRequest, 'columns'>) {
  const output = new PassThrough();
  const chunks: Buffer[] = [];
  output.on('data', (chunk: Buffer) => chunks.push(chunk));
  const book = openWorkbook(output, request as ExportRequest);
  const stream = (book.sheet as unknown as { stream: { write(data: unknown): unknown } }).stream;
  const write = stream.write.bind(stream);
  const sheet: Buffer[] = [];
  stream.write = (data: unknown) => {
    sheet.push(
      typeof data === 'string'
        ? Buffer.from(data)
        : Buffer.isBuffer(data)
          ? data
          : (data as { toBuffer(): Buffer }).toBuffer(),
    );
    return write(data);
  };
  return {
    output,
    book,
    async finish() {
      book.sheet.commit();
      await book.workbook.commit();
      return { sheetXml: Buffer.concat(sheet).toString('utf8'), file: Buffer.concat(chunks) };
    },
  };
}

/** The page through exceljs' renderer, as export.ts' values path writes it. */
async function viaExceljs(request: Pick<ExportRequest, 'columns' | 'query'>) {
  const target = capture(request);
  const { rows: values } = await db.pool.query({
    text: `SELECT ${request.columns.map(xlsxProjection).join(', ')} FROM (${request.query.text}\nLIMIT 50000) AS export_page`,
    values: request.query.values,
    rowMode: 'array',
  });
  const writeRow = sheetValuesWriter(target.book, request.columns);
  for (const row of values) writeRow(row);
  return target.finish();
}

/** The page through PostgreSQL's rendering (xlsx-sql.ts), as export.ts' XML path writes it. */
async function viaPostgres(request: Pick<ExportRequest, 'columns' | 'query'>) {
  const target = capture(request);
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const page = { ...request, offset: 0 };
    const xml = await startSheetXml(
      client,
      page,
      inlineParameters(request.query.text, request.query.values),
      target.book,
    );
    expect(xml).toBeDefined();
    if (!xml) throw new Error('no SQL rendering');
    await writeSheetXml(target.output, () => false, target.book, xml);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  return target.finish();
}

/** Where two sheets' XML first differ, with some context (undefined when they are equal). */
function firstDifference(actual: string, expected: string) {
  if (actual === expected) return undefined;
  let at = 0;
  while (at < actual.length && actual[at] === expected[at]) at += 1;
  return {
    at,
    actual: actual.slice(Math.max(0, at - 120), at + 80),
    expected: expected.slice(Math.max(0, at - 120), at + 80),
  };
}

/** Every cell as exceljs reads it back: address, type, value, number format. */
async function cells(file: Buffer) {
  const book = new ExcelJS.Workbook();
  await book.xlsx.load(file as unknown as ArrayBuffer);
  const seen: unknown[] = [];
  book.worksheets[0]?.eachRow({ includeEmpty: true }, (row) => {
    row.eachCell({ includeEmpty: true }, (cell) => {
      seen.push([cell.address, cell.type, cell.value, cell.numFmt ?? null]);
    });
  });
  return seen;
}

describe('sheet rows rendered by PostgreSQL', () => {
  it('are the XML exceljs writes for the same page, byte for byte, over edge values of every column kind', async () => {
    const request = { columns, query: statement() };
    const [expected, actual] = [await viaExceljs(request), await viaPostgres(request)];
    expect(actual.sheetXml.length).toBeGreaterThan(100_000);
    expect(firstDifference(actual.sheetXml, expected.sheetXml)).toBe(undefined);
    // Spot checks of what the comparison covers, as a reader sees the cells.
    const read = await cells(actual.file);
    expect(read).toEqual(await cells(expected.file));
    expect(read).toContainEqual(['A2', ExcelJS.ValueType.String, 'first <&> "row"', null]);
    expect(read).toContainEqual(['B2', ExcelJS.ValueType.Number, 0.1 + 0.2, null]);
    expect(read).toContainEqual(['B3', ExcelJS.ValueType.Number, 1e21, null]);
    expect(read).toContainEqual(['B4', ExcelJS.ValueType.Number, -1e-6, null]);
    expect(read).toContainEqual([
      'C3',
      ExcelJS.ValueType.Date,
      new Date('1969-07-20T20:17:40Z'),
      'yyyy-mm-dd hh:mm:ss.000',
    ]);
    expect(read).toContainEqual(['A3', ExcelJS.ValueType.String, `it's \u00e9t\u00e9 \u2013 ${EMOJI}`, null]);
    expect(read).toContainEqual(['A6', ExcelJS.ValueType.String, 'ctrl end !', null]);
    // The all-NULL row 7 is left out, as exceljs leaves it out.
    expect(actual.sheetXml).not.toContain('<row r="7"');
    expect(actual.sheetXml).toContain('<row r="8"');
    const long = read.find((cell) => (cell as unknown[])[0] === 'A17') as unknown[];
    expect((long[2] as string).length).toBe(32767);
    expect((long[2] as string).endsWith(`${EMOJI}\uFFFD`)).toBe(true);
  });

  it('keep the rows exceljs writes across many reads of the COPY stream (3 × the edge rows)', async () => {
    const request = { columns, query: statement(3) };
    const [expected, actual] = [await viaExceljs(request), await viaPostgres(request)];
    expect(firstDifference(actual.sheetXml, expected.sheetXml)).toBe(undefined);
    expect(actual.sheetXml).toContain('<row r="55"');
  });

  it('print every float8 below 2^53 as JavaScript’s String(x) does, and every other one as text that reads back as the same double', async () => {
    const bits = new Float64Array(randomBytes(8 * 20_000).buffer);
    const values = [...bits].filter((value) => Number.isFinite(value));
    for (let exponent = -330; exponent <= 310; exponent += 1) {
      for (const mantissa of [1, 1.5, 9.999999, Math.PI, 123456789.123]) values.push(mantissa * 10 ** exponent);
    }
    values.push(0, -0, 1e-7, 1e-6, 1e-5, 1e-4, 1e14, 1e15, 2 ** 53 - 1, 2 ** 53, 1e20, 1e21, 1e23, Number.MIN_VALUE);
    const { rows } = await db.pool.query<{ text: string }>(
      `SELECT ${jsNumberSql('v.x')} AS text FROM unnest($1::float8[]) WITH ORDINALITY AS v(x, i) ORDER BY v.i`,
      [values.map((value) => String(value))],
    );
    expect(rows).toHaveLength(values.length);
    const small = rows.flatMap((row, index) =>
      Math.abs(values[index] as number) < 2 ** 53 ? [[row.text, String(values[index])]] : [],
    );
    expect(small.length).toBeGreaterThan(10_000);
    expect(small.filter(([sql, js]) => sql !== js)).toEqual([]);
    // From 2^53 on, a shortest decimal can lie exactly halfway between two doubles;
    // JavaScript then takes it (1e+23), PostgreSQL's shortest output one digit more
    // (9.999999999999999e+22). Both read back as the same double, which is the cell's
    // value; such figures do not occur in exports (distances, durations, counts).
    const large = rows.flatMap((row, index) =>
      Math.abs(values[index] as number) >= 2 ** 53 ? [[Number(row.text), values[index]]] : [],
    );
    expect(large.length).toBeGreaterThan(1_000);
    expect(large.filter(([sql, js]) => !Object.is(sql, js))).toEqual([]);
  });

  it('are not used for a column whose value exceljs gets from pg’s parsing alone (a timestamp without a declared type)', async () => {
    const target = capture({ columns: [{ name: 'at' }] });
    const writer = sheetXmlWriter(target.book.sheet, { plain: {}, date: {} });
    if (!writer) throw new Error('exceljs internals missing');
    expect(xlsxRowsStatement({ columns: [{ name: 'at' }], offset: 0 }, 'SELECT now() AS at', [1184], writer)).toBe(
      undefined,
    );
    expect(xlsxRowsStatement({ columns: [{ name: 'at' }], offset: 0 }, 'SELECT now() AS at', [3802], writer)).toBe(
      undefined,
    );
  });
});

describe('CopyBinaryFields', () => {
  it('gives the same bytes however the COPY stream is cut, with XML-invalid characters removed', async () => {
    const { rows } = await db.pool.query<{ bytes: Buffer }>(
      `SELECT convert_to(x, 'UTF8') AS bytes FROM unnest(ARRAY['<row>' || chr(1) || 'a' || chr(65534) || 'b' || chr(61440) || chr(65535) || '</row>', '', '<row>' || chr(128668) || '</row>']) AS x`,
    );
    // The binary COPY format of these three one-column rows, built by hand.
    const tuple = (bytes: Buffer) => {
      const head = Buffer.alloc(6);
      head.writeInt16BE(1, 0);
      head.writeInt32BE(bytes.length, 2);
      return Buffer.concat([head, bytes]);
    };
    const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
    const stream = Buffer.concat([header, ...rows.map((row) => tuple(row.bytes)), Buffer.from([0xff, 0xff])]);
    // U+F000 (EF 80 80) starts like U+FFFE and stays.
    const expected = `<row>ab\uF000</row><row>${EMOJI}</row>`;
    for (const size of [1, 2, 3, 5, 7, 64, stream.length]) {
      const fields = new CopyBinaryFields();
      const out: Buffer[] = [];
      fields.on('data', (chunk: Buffer) => out.push(chunk));
      const ended = new Promise((resolve) => fields.on('end', resolve));
      for (let at = 0; at < stream.length; at += size) fields.write(stream.subarray(at, at + size));
      fields.end();
      await ended;
      expect(Buffer.concat(out).toString('utf8')).toBe(expected);
      expect(fields.rows).toBe(3);
    }
  });
});
