/**
 * Streaming CSV/XLSX exports for any feature (docs/telemetry-api.md and docs/reporting.md, "Exports").
 *
 * A feature hands over one ordered SQL query with its parameters and the list of
 * columns to export; this module answers one page of at most 50,000 rows, starting at
 * the `offset` query parameter, with the spec's headers:
 *
 *   X-Export-Limit      maximum rows in this response (50000)
 *   X-Export-Offset     offset used
 *   X-Export-Truncated  true when more rows remain after this page
 *   X-Next-Offset       offset of the next page (only when truncated)
 *
 * CSV goes through `COPY (…) TO STDOUT WITH (FORMAT csv, HEADER)` (pg-copy-streams),
 * XLSX through exceljs' streaming WorkbookWriter fed from a pg cursor, 100 rows at a
 * time. Both follow the client's pace: a slow reader leaves the rest of the page in
 * PostgreSQL, not in this process, and a client that leaves before the last byte gets
 * its query cancelled (see ExportConnection). The rows are read in a REPEATABLE READ
 * transaction whose snapshot a second, short-lived connection imports to answer "more
 * rows?" for the headers while the page is being computed, so the headers and the body
 * describe the same snapshot and the check costs no time of its own.
 *
 * Usage in a feature's routes.ts:
 *
 *   import { exportQueryParams, exportResponses, sendExport } from '../../http/export.ts';
 *
 *   defineRoute({
 *     method: 'get', base: 'external', path: '/telemetry/utilization/export.csv',
 *     operationId: 'exportUtilizationCsv', summary: '…', tags: ['Telemetry'], auth: 'apiKey',
 *     rateLimit: 'export',
 *     request: { query: rangeQuery.extend(exportQueryParams) },
 *     responses: exportResponses('csv'),
 *     handler: async (ctx, { query, auth }) => {
 *       const range = resolveRange(query, rules);   // every 400 is thrown before a byte is sent
 *       await sendExport(ctx, deps.pool, {
 *         format: 'csv',
 *         filename: 'utilization',
 *         columns: [
 *           { name: 'bucketStart', type: 'timestamp' },
 *           { name: 'assetId' },
 *           { name: 'distanceM', type: 'number' },
 *         ],
 *         query: {
 *           text: `/* api:exportUtilization *\/
 *                  SELECT u.bucket AS "bucketStart", u.asset_id AS "assetId", u.distance_m AS "distanceM"
 *                    FROM utilization_hourly u
 *                   WHERE u.tenant_id = $1::uuid AND u.bucket >= $2::timestamptz AND u.bucket < $3::timestamptz
 *                   ORDER BY u.bucket, u.asset_id`,
 *           values: [auth.tenantId, range.from, range.to],
 *         },
 *         offset: query.offset,
 *       });
 *     },
 *   });
 *
 * Rules for `query.text`:
 * - one SELECT (a WITH … SELECT is fine) whose ORDER BY is total (ends with a unique
 *   key), so consecutive pages neither repeat nor miss a row; no LIMIT/OFFSET of its own;
 * - its output columns are named exactly as `columns[].name` (quote camelCase aliases);
 *   those names are the header row; other output columns are not exported;
 * - parameters are `$1…$n`, each with an explicit cast (`$1::uuid`, `$2::timestamptz`,
 *   `$3::text[]`): COPY cannot take bind parameters, so for the CSV path each value is
 *   inlined as a quoted literal (pg's escapeLiteral; numbers checked finite and
 *   parenthesised; strings with NUL refused with 400). Never build the text from input.
 */
import { PassThrough, finished, type Readable } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import ExcelJS from 'exceljs';
import pg from 'pg';
import Cursor from 'pg-cursor';
import { to as copyTo } from 'pg-copy-streams';
import { z } from 'zod';
import { beginInSnapshot, type Pool, type PoolClient } from '@gantry/db';
import { currentPool } from '../read-routing.ts';
import { ValidationError } from '../errors.ts';
import { ErrorResponse } from './common-schemas.ts';
import type { ResponseSpec } from './route.ts';
import {
  sheetRowWriter,
  sheetXmlWriter,
  type CellModel,
  type SheetRowWriter,
  type SheetXmlWriter,
} from './xlsx-rows.ts';
import { CopyBinaryFields, sheetColumn, sheetRowsStatement, type SheetColumn } from './xlsx-sql.ts';

/** Rows in one export response (spec "Limits"). */
export const EXPORT_MAX_ROWS = 50_000;

export type ExportFormat = 'csv' | 'xlsx';

export const exportContentTypes: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
};

/** How a column is written: timestamps as RFC 3339 UTC text in CSV and date cells in XLSX. */
export type ExportColumnType = 'text' | 'integer' | 'number' | 'boolean' | 'timestamp' | 'json';

export interface ExportColumn {
  /** Output column of the query, and the header of the file. */
  name: string;
  type?: ExportColumnType;
  /** XLSX column width in characters. */
  width?: number;
}

export interface ExportRequest {
  format: ExportFormat;
  /** File name without extension; characters other than letters, digits, . _ - become _. */
  filename: string;
  columns: ExportColumn[];
  query: { text: string; values: unknown[] };
  /** Zero-based offset of the first row (the `offset` query parameter). */
  offset: number;
  /** XLSX sheet name (default "Export"). */
  sheetName?: string;
}

/** The `offset` query parameter of every export route; merge into the route's query schema. */
export const exportQueryParams = {
  offset: z.coerce
    .number({ error: 'must be an integer ≥ 0' })
    .int('must be an integer ≥ 0')
    .min(0, 'must be an integer ≥ 0')
    .max(1_000_000_000, 'is too large')
    .default(0)
    .meta({ description: 'Zero-based offset of the first row; use X-Next-Offset of the previous page', example: 0 }),
};

const exportHeaders: NonNullable<ResponseSpec['headers']> = {
  'X-Export-Limit': { description: 'Maximum rows in this response (50000)', schema: { type: 'integer' } },
  'X-Export-Offset': { description: 'Offset of the first row in this response', schema: { type: 'integer' } },
  'X-Export-Truncated': { description: 'true when more rows remain after this response', schema: { type: 'boolean' } },
  'X-Next-Offset': {
    description: 'Offset for the next call; present only when truncated',
    schema: { type: 'integer' },
  },
  'Content-Disposition': { description: 'attachment with the file name', schema: { type: 'string' } },
};

/** The `responses` of an export route: the file, and the spec's export errors. */
export function exportResponses(format: ExportFormat): Record<number, ResponseSpec> {
  return {
    200: {
      description: format === 'csv' ? 'CSV file, header row first' : 'XLSX workbook with one sheet, header row first',
      contentType: exportContentTypes[format].split(';')[0],
      headers: exportHeaders,
    },
    400: { description: 'Invalid range or filter', schema: ErrorResponse },
    401: { description: 'Missing, disabled or invalid key', schema: ErrorResponse },
    429: { description: 'Rate limit exceeded', schema: ErrorResponse },
  };
}

/** Streams one page of the export as the response of ctx. */
export async function sendExport(ctx: Context, pool: Pool, request: ExportRequest): Promise<void> {
  if (!Number.isSafeInteger(request.offset) || request.offset < 0) {
    throw new ValidationError('invalid query parameter offset: must be an integer ≥ 0', 'invalid_parameter');
  }
  if (request.columns.length === 0) throw new Error('an export needs at least one column');
  // Inlining happens before the first query so a bad value is a 400, not a broken file.
  const copyText = request.format === 'csv' ? copyStatement(request) : null;
  const inlined = request.format === 'xlsx' ? inlineParameters(request.query.text, request.query.values) : null;

  const client = await pool.connect();
  // Side connections and cancels must reach the server this connection is on (a replica, say).
  const connection = new ExportConnection(currentPool(pool), client, ctx.res);
  try {
    // A page streams at the pace of its reader: the pool's statement_timeout would cut a
    // slow download, which ends instead when the client goes away.
    await connection.client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = 0');
    const { rows } = await connection.client.query<{ snapshot: string }>(
      '/* api:exportSnapshot */ SELECT pg_export_snapshot() AS snapshot',
    );
    // The page check runs beside the page, on a second connection reading the same
    // snapshot: the rows are computed while it looks past them, instead of after.
    const probe = connection.beside(rows[0]?.snapshot ?? '', (client) => pageCheck(client, request));
    const body = copyText !== null ? startCsv(connection, copyText) : startXlsx(connection, request, inlined ?? '');
    const truncated = await probe;
    if (connection.gone) throw new Error('export client went away');
    setExportHeaders(ctx, request, truncated);
    body.send(ctx);
  } catch (error) {
    connection.abandon(error instanceof Error ? error : new Error(String(error)));
    // Nobody is left to read an error response (the query was cancelled because of that).
    if (connection.gone) return;
    throw error;
  }
}

/**
 * Whether rows remain past the page, after checking that the query has the columns to
 * export (a misnamed column is a 500 before any byte; LIMIT 0 plans without running).
 * The existence check needs none of the query's output columns, so the planner drops
 * the joins and expressions that only feed them.
 */
async function pageCheck(client: pg.Client, request: ExportRequest): Promise<boolean> {
  await client.query(
    `/* api:exportColumns */ SELECT ${plainProjection(request.columns)} FROM (${request.query.text}\n) AS export_page LIMIT 0`,
    request.query.values,
  );
  const limitIndex = request.query.values.length + 1;
  const probe = await client.query<{ more: boolean }>(
    `/* api:exportProbe */ SELECT EXISTS (SELECT 1 FROM (${request.query.text}\n) AS export_page OFFSET $${limitIndex}::bigint) AS more`,
    [...request.query.values, request.offset + EXPORT_MAX_ROWS],
  );
  return probe.rows[0]?.more === true;
}

/** The body of a page, started before the headers are known and sent once they are. */
interface ExportBody {
  send(ctx: Context): void;
}

/**
 * The pooled connection of one export and what ends it. Done: COMMIT and back to the
 * pool. Failed, or the client went away before the last byte: the backend's query is
 * cancelled (pg_cancel_backend from a connection of its own, so it works when the pool
 * is exhausted, and while the backend is computing rather than writing — a closed
 * socket alone stops it only at its next write), then the connection is discarded,
 * since it may still be inside COPY. The page check's connection (beside) is cancelled
 * the same way.
 */
class ExportConnection {
  private ended = false;
  /** Connections running beside this one (the page check), cancelled with it. */
  private readonly besides = new Set<pg.Client>();
  /** True once the response closed before its last byte. */
  gone = false;

  constructor(
    private readonly pool: Pool,
    readonly client: PoolClient,
    response: ServerResponse,
  ) {
    if (response.destroyed) this.gone = true;
    response.once('close', () => {
      if (response.writableFinished) return;
      this.gone = true;
      this.abandon(new Error('export client went away'));
    });
    if (this.gone) this.abandon(new Error('export client went away'));
  }

  /**
   * Runs fn on a connection of its own (not the pool's: an export holding one pooled
   * connection must never wait for a second) inside a read-only transaction on the
   * export's snapshot. The export's transaction outlives it: the page is handed to the
   * response, and so can end and commit, only after fn is done. Abandoning the export
   * cancels fn's query as well.
   */
  async beside<T>(snapshot: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ ...this.pool.options, connectionTimeoutMillis: 10_000 });
    // Errors reach fn's queries; a broken socket afterwards must not crash the process.
    client.on('error', () => undefined);
    this.besides.add(client);
    try {
      if (this.ended) throw new Error('export already ended');
      await client.connect();
      // Abandoned while connecting: there was no process id to cancel yet.
      if (this.ended) throw new Error('export already ended');
      await beginInSnapshot(client, snapshot);
      return await fn(client);
    } finally {
      this.besides.delete(client);
      // Ending the session also ends its read-only transaction; nothing to commit.
      void client.end().catch(() => undefined);
    }
  }

  /** The query is over: commit the read-only transaction and give the connection back. */
  finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.client.query('COMMIT').then(
      () => this.client.release(),
      (error: Error) => this.client.release(error),
    );
  }

  abandon(error: Error): void {
    if (this.ended) return;
    this.ended = true;
    for (const client of this.besides) void cancelBackend(this.pool, processId(client));
    const pid = processId(this.client);
    // The connection is held until the cancel is done, so the pid cannot be reused meanwhile.
    void cancelBackend(this.pool, pid).finally(() => this.client.release(error));
  }
}

function processId(client: pg.ClientBase): number | undefined {
  return (client as unknown as { processID?: number | null }).processID ?? undefined;
}

async function cancelBackend(pool: Pool, pid: number | undefined): Promise<void> {
  if (pid === undefined) return;
  const canceller = new pg.Client({ ...pool.options, connectionTimeoutMillis: 5_000 });
  try {
    await canceller.connect();
    await canceller.query('/* api:exportCancel */ SELECT pg_cancel_backend($1::int)', [pid]);
  } catch {
    // The connection is discarded anyway; its backend stops at its next write.
  } finally {
    await canceller.end().catch(() => undefined);
  }
}

function setExportHeaders(ctx: Context, request: ExportRequest, truncated: boolean): void {
  const base = request.filename.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 100) || 'export';
  const name = `${base}${request.offset > 0 ? `-offset-${request.offset}` : ''}.${request.format}`;
  ctx.status = 200;
  ctx.set('Content-Type', exportContentTypes[request.format]);
  ctx.set('Content-Disposition', `attachment; filename="${name}"`);
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Export-Limit', String(EXPORT_MAX_ROWS));
  ctx.set('X-Export-Offset', String(request.offset));
  ctx.set('X-Export-Truncated', truncated ? 'true' : 'false');
  if (truncated) ctx.set('X-Next-Offset', String(request.offset + EXPORT_MAX_ROWS));
}

function pageQuery(text: string, offset: number, projection: string): string {
  return `SELECT ${projection} FROM ${pageFrom(text, offset)}`;
}

/** The page as a FROM item named export_page. */
function pageFrom(text: string, offset: number): string {
  return `(${text}\nLIMIT ${EXPORT_MAX_ROWS} OFFSET ${offset}) AS export_page`;
}

/** The exported columns by name. */
function plainProjection(columns: ExportColumn[]): string {
  return columns.map((column) => `export_page.${pg.escapeIdentifier(column.name)}`).join(', ');
}

/**
 * A timestamptz as the API writes timestamps (`2026-11-27T05:18:14.123Z`, what
 * Date#toISOString gives): formatted by PostgreSQL, for answers read as text or JSON.
 */
export function isoTextSql(expression: string): string {
  return `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

function csvProjection(column: ExportColumn): string {
  const ref = `export_page.${pg.escapeIdentifier(column.name)}`;
  const alias = pg.escapeIdentifier(column.name);
  switch (column.type) {
    case 'timestamp':
      return `${isoTextSql(ref)} AS ${alias}`;
    case 'boolean':
      return `CASE WHEN ${ref} THEN 'true' WHEN NOT ${ref} THEN 'false' END AS ${alias}`;
    case 'json':
      return `${ref}::text AS ${alias}`;
    default:
      return `${ref} AS ${alias}`;
  }
}

/**
 * The COPY statement of a CSV page, parameters inlined: what the CSV path runs, and what
 * `pnpm bench:exports` hands to psql as the baseline.
 */
export function copyStatement(request: Pick<ExportRequest, 'columns' | 'query' | 'offset'>): string {
  const text = inlineParameters(request.query.text, request.query.values);
  const projection = request.columns.map(csvProjection).join(', ');
  return `/* api:exportCsv */ COPY (${pageQuery(text, request.offset, projection)}) TO STDOUT WITH (FORMAT csv, HEADER true)`;
}

/**
 * The COPY stream is the response body; Koa pipes it to the socket with back-pressure:
 * pg-copy-streams reads the database socket only while the response accepts more, so a
 * slow client leaves the rows in PostgreSQL (its socket buffer, then a blocked backend),
 * not in this process.
 */
function startCsv(connection: ExportConnection, copyText: string): ExportBody {
  const copy = connection.client.query(copyTo(copyText));
  finished(copy, (error) => {
    if (error) connection.abandon(error instanceof Error ? error : new Error(String(error)));
    else connection.finish();
  });
  return {
    send(ctx) {
      // A COPY that failed while the page check ran (no byte is sent yet): a 500.
      if (copy.errored) throw copy.errored;
      ctx.body = copy;
    },
  };
}

/**
 * A column as the XLSX path reads it. JSON as PostgreSQL writes it, so both formats carry
 * the same text. Timestamps as whole epoch milliseconds (float8, exact: computed in
 * numeric), since `new Date(ms)` is far cheaper than parsing PostgreSQL's text form
 * (postgres-date took 6% of the reporting export's CPU); the cell shows milliseconds, as
 * the CSV does.
 */
export function xlsxProjection(column: ExportColumn): string {
  const ref = `export_page.${pg.escapeIdentifier(column.name)}`;
  const alias = pg.escapeIdentifier(column.name);
  switch (column.type) {
    case 'json':
      return `${ref}::text AS ${alias}`;
    case 'timestamp':
      return `floor(extract(epoch FROM ${ref}) * 1000)::float8 AS ${alias}`;
    default:
      return ref;
  }
}

/** Characters XML 1.0 cannot carry; a cell holding one would make the workbook unreadable. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters XML cannot carry
const XML_INVALID = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g;
/** Longest text a spreadsheet cell holds. */
const CELL_MAX_CHARS = 32_767;

function cellValue(value: unknown, type: ExportColumnType | undefined): ExcelJS.CellValue {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'timestamp':
      // Epoch milliseconds (xlsxProjection); ±infinity has no date cell.
      if (typeof value === 'number') return Number.isFinite(value) ? new Date(value) : null;
      return value instanceof Date ? value : new Date(String(value));
    case 'integer':
    case 'number':
      return typeof value === 'number' ? value : Number(value);
    case 'boolean':
      return value === true ? 'true' : value === false ? 'false' : String(value);
    case 'json':
      return cellText(typeof value === 'string' ? value : JSON.stringify(value));
    default:
      if (value instanceof Date) return value;
      if (typeof value === 'number') return value;
      return cellText(typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
}

function cellText(text: string): string {
  const clean = text.replace(XML_INVALID, '');
  return clean.length > CELL_MAX_CHARS ? clean.slice(0, CELL_MAX_CHARS) : clean;
}

/**
 * Rows per cursor read. Small on purpose: a batch's rows stay referenced while exceljs
 * allocates for them, and with 1,000 rows they outlived two scavenges and were promoted,
 * so the old space grew by 25-50 MB of dead rows per 50,000-row page before a full GC
 * (RSS +75 MB after warm-up for the reporting export). With 100 they die young (+8-18
 * MB); the extra round trips overlap with the writing and cost no measurable time.
 */
const XLSX_BATCH_ROWS = 100;

const TIMESTAMP_STYLE: Partial<ExcelJS.Style> = { numFmt: 'yyyy-mm-dd hh:mm:ss.000' };
const PLAIN_STYLE: Partial<ExcelJS.Style> = {};
const ROW_STYLE: Partial<ExcelJS.Style> = {};

/**
 * The style of a cell. exceljs' styles writer renders each style object it has not seen
 * before as XML to find its style id (two thirds of the XLSX time went there when every
 * cell had an object of its own); one shared object per kind of cell makes that a WeakMap
 * hit after the first row. A date always gets the date format (the cache is by object,
 * not by value type).
 */
function cellStyle(value: ExcelJS.CellValue, column: ExportColumn): Partial<ExcelJS.Style> {
  return value instanceof Date || column.type === 'timestamp' ? TIMESTAMP_STYLE : PLAIN_STYLE;
}

/** One row through exceljs' Row and Cell objects (when sheetRowWriter is unavailable). */
function addSheetRow(sheet: ExcelJS.Worksheet, columns: ExportColumn[], row: unknown[]): void {
  const values = new Array<ExcelJS.CellValue>(columns.length);
  for (let index = 0; index < columns.length; index += 1) {
    values[index] = cellValue(row[index], (columns[index] as ExportColumn).type);
  }
  const sheetRow = sheet.addRow(values);
  // Row.style is what the writer reads for the row; exceljs' typings leave it out.
  (sheetRow as ExcelJS.Row & { style: Partial<ExcelJS.Style> }).style = ROW_STYLE;
  for (let index = 0; index < columns.length; index += 1) {
    sheetRow.getCell(index + 1).style = cellStyle(values[index] ?? null, columns[index] as ExportColumn);
  }
  sheetRow.commit();
}

/** One row as the cell models exceljs' Row would give its renderer (see xlsx-rows.ts). */
function writeSheetRow(writer: SheetRowWriter, columns: ExportColumn[], row: unknown[]): void {
  const suffix = String(writer.nextRow);
  const cells = new Array<CellModel>(columns.length);
  for (let index = 0; index < columns.length; index += 1) {
    const column = columns[index] as ExportColumn;
    const value = cellValue(row[index], column.type);
    const address = (writer.letters[index] as string) + suffix;
    const style = cellStyle(value, column);
    if (typeof value === 'number') cells[index] = { address, type: ExcelJS.ValueType.Number, value, style };
    else if (typeof value === 'string') cells[index] = { address, type: ExcelJS.ValueType.String, value, style };
    else if (value instanceof Date) cells[index] = { address, type: ExcelJS.ValueType.Date, value, style };
    else cells[index] = { address, type: ExcelJS.ValueType.Null, style };
  }
  writer.write(cells);
}

/**
 * Writes one data row of values (as the XLSX cursor reads them, xlsxProjection) through
 * exceljs' renderer.
 */
export function sheetValuesWriter(book: XlsxBook, columns: ExportColumn[]): (row: unknown[]) => void {
  const writer = sheetRowWriter(book.sheet, columns.length, ROW_STYLE);
  return writer ? (row) => writeSheetRow(writer, columns, row) : (row) => addSheetRow(book.sheet, columns, row);
}

/** The workbook of one XLSX page, its header row written. */
export interface XlsxBook {
  workbook: ExcelJS.stream.xlsx.WorkbookWriter;
  sheet: ExcelJS.Worksheet;
  /**
   * The streams between the sheet's XML and deflate (see deflateInputs); looked up each
   * time, since the zip connects the sheet's stream only once it starts the entry.
   */
  readonly inputs: Backlogged[];
}

export function openWorkbook(output: PassThrough, request: ExportRequest): XlsxBook {
  const workbook = new ExcelJS.stream.xlsx.WorkbookWriter({
    stream: output,
    useStyles: true,
    useSharedStrings: false,
    zip: { zlib: { level: 1 } },
  });
  const sheetName = (request.sheetName ?? 'Export').replace(/[[\]:*?/\\]/g, ' ').slice(0, 31) || 'Export';
  const sheet = workbook.addWorksheet(sheetName, { views: [{ state: 'frozen', ySplit: 1 }] });
  sheet.columns = request.columns.map((column) => ({
    header: column.name,
    key: column.name,
    width: column.width ?? (column.type === 'timestamp' ? 24 : Math.min(Math.max(column.name.length + 2, 12), 40)),
    ...(column.type === 'timestamp' ? { style: TIMESTAMP_STYLE } : {}),
  }));
  // The header row goes through exceljs as usual; the data rows skip its Row and Cell objects.
  sheet.getRow(1).commit();
  return {
    workbook,
    sheet,
    get inputs() {
      return deflateInputs(sheet);
    },
  };
}

/** Where the data rows come from: sheet XML from PostgreSQL, or values for exceljs' renderer. */
type XlsxRows =
  | ({ kind: 'xml' } & SheetXmlRows)
  | { kind: 'values'; cursor: Cursor; first: Promise<unknown[][]>; read: () => Promise<unknown[][]> };

/**
 * An XLSX page: the workbook is opened and the rows' statement started at once, so
 * PostgreSQL computes the first rows while the page check runs; the body is sent once
 * the headers are known. The rows' XML is rendered by PostgreSQL (xlsx-sql.ts) when
 * every column's type allows it — the statement's output types are read first (LIMIT 0)
 * — and by exceljs from a cursor's values otherwise.
 */
function startXlsx(connection: ExportConnection, request: ExportRequest, inlinedText: string): ExportBody {
  const output = new PassThrough();
  const book = openWorkbook(output, request);
  const rows = startXlsxRows(connection, request, inlinedText, book);
  // Awaited when the body is sent, unless the export fails first: then its rejection is expected.
  rows.catch(() => undefined);
  return {
    send(ctx) {
      ctx.body = output;
      writeWorkbook(output, connection, book, request, rows).catch((error: Error) => {
        connection.abandon(error);
        output.destroy(error);
      });
    },
  };
}

/**
 * The binary COPY of the page's sheet rows as XML (xlsx-sql.ts), given the PostgreSQL
 * types of the exported columns; undefined when a column's type is not rendered there.
 * `inlinedText` is the statement with its parameters inlined (COPY takes none).
 */
export function xlsxRowsStatement(
  request: Pick<ExportRequest, 'columns' | 'offset'>,
  inlinedText: string,
  typeOids: number[],
  writer: SheetXmlWriter,
): string | undefined {
  const columns = request.columns.map((column, index) => sheetColumn(column.name, column.type, typeOids[index] ?? 0));
  if (!columns.every((column): column is SheetColumn => column !== undefined)) return undefined;
  // exceljs caches a style id by style object, under the type of the first cell it saw.
  const firstPlain = columns.find((column) => column.kind !== 'date');
  const styles = writer.styleIds(firstPlain?.kind === 'number' ? ExcelJS.ValueType.Number : ExcelJS.ValueType.String);
  const statement = sheetRowsStatement(pageFrom(inlinedText, request.offset), columns, styles, writer.nextRow);
  // The statement's own tag comes first as well: pg_stat_activity keeps only the first
  // 1 kB of a query, and the row XML comes before the statement.
  const tag = /^\s*(\/\*[^*]*\*\/)/.exec(inlinedText)?.[1] ?? '';
  return `/* api:exportXlsxRows */ ${tag} COPY (${statement}) TO STDOUT WITH (FORMAT binary)`;
}

/**
 * Starts the binary COPY of the page's sheet rows as XML on the client (inside the
 * export's transaction), after reading the statement's output types; undefined, with
 * nothing started, when a column's type is not rendered in SQL or exceljs' internals
 * are not there.
 */
export async function startSheetXml(
  client: pg.ClientBase,
  request: Pick<ExportRequest, 'columns' | 'offset' | 'query'>,
  inlinedText: string,
  book: XlsxBook,
): Promise<SheetXmlRows | undefined> {
  const writer = sheetXmlWriter(book.sheet, { plain: PLAIN_STYLE, date: TIMESTAMP_STYLE });
  if (!writer) return undefined;
  const { fields } = await client.query({
    text: `/* api:exportXlsxColumns */ SELECT ${plainProjection(request.columns)} FROM (${request.query.text}\n) AS export_page LIMIT 0`,
    values: request.query.values,
    rowMode: 'array',
  });
  const statement = xlsxRowsStatement(
    request,
    inlinedText,
    fields.map((field) => field.dataTypeID),
    writer,
  );
  if (statement === undefined) return undefined;
  // Numbers print as JavaScript prints them only at PostgreSQL's default (xlsx-sql.ts).
  // JIT compiling the row expression (some 30 cells) cost 10-20 s; run it interpreted.
  await client.query(
    `/* api:exportXlsxSettings */ SELECT set_config('extra_float_digits', '1', true), set_config('jit', 'off', true)`,
  );
  const copy = client.query(copyTo(statement));
  // Until it is read (once the headers are sent), a failure is kept in copy.errored.
  copy.on('error', () => undefined);
  return { copy, writer };
}

/** The rows' XML on its way from PostgreSQL, and where it goes. */
export interface SheetXmlRows {
  copy: Readable;
  writer: SheetXmlWriter;
}

async function startXlsxRows(
  connection: ExportConnection,
  request: ExportRequest,
  inlinedText: string,
  book: XlsxBook,
): Promise<XlsxRows> {
  const xml = await startSheetXml(connection.client, request, inlinedText, book);
  if (xml) return { kind: 'xml', ...xml };
  const projection = request.columns.map(xlsxProjection).join(', ');
  const cursor = connection.client.query(
    new Cursor(
      `/* api:exportXlsx */ ${pageQuery(request.query.text, request.offset, projection)}`,
      request.query.values,
      { rowMode: 'array' },
    ),
  );
  const read = () => {
    const batch = cursor.read(XLSX_BATCH_ROWS) as Promise<unknown[][]>;
    // Awaited below, unless the export fails first: then its rejection is expected.
    batch.catch(() => undefined);
    return batch;
  };
  // The first batch is computed while the page check runs.
  return { kind: 'values', cursor, first: read(), read };
}

async function writeWorkbook(
  output: PassThrough,
  connection: ExportConnection,
  book: XlsxBook,
  request: ExportRequest,
  source: Promise<XlsxRows>,
): Promise<void> {
  const rows = await source;
  if (rows.kind === 'xml') await writeSheetXml(output, () => connection.gone, book, rows);
  else await writeSheetValues(output, connection, book, request, rows);
  connection.finish();
  book.sheet.commit();
  await book.workbook.commit();
}

/**
 * Bytes of sheet XML held in this process before the pipeline is waited on: about what a
 * 100-row batch of the values path held.
 */
const XML_BATCH_BYTES = 128 * 1024;

/**
 * The rows' XML from the binary COPY into the sheet's stream. The COPY stream is paused
 * whenever a batch has been handed over, until deflate and the response have taken it
 * (drained): meanwhile pg-copy-streams does not read the database socket, so a slow
 * client leaves the rest of the page in PostgreSQL.
 */
export async function writeSheetXml(
  output: PassThrough,
  gone: () => boolean,
  book: XlsxBook,
  { copy, writer }: SheetXmlRows,
): Promise<void> {
  if (copy.errored) throw copy.errored;
  const fields = new CopyBinaryFields();
  await new Promise<void>((resolve, reject) => {
    let pending = 0;
    let settled = false;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      copy.destroy();
      reject(error);
    };
    fields.on('data', (chunk: Buffer) => {
      writer.write(chunk);
      pending += chunk.length;
      if (pending < XML_BATCH_BYTES) return;
      pending = 0;
      copy.pause();
      drained(output, book.inputs).then(() => {
        if (gone()) fail(new Error('export client went away'));
        else copy.resume();
      }, fail);
    });
    fields.on('error', fail);
    copy.on('error', fail);
    fields.on('end', () => {
      if (settled) return;
      settled = true;
      resolve();
    });
    copy.on('data', (chunk: Buffer) => fields.write(chunk));
    copy.on('end', () => fields.end());
  });
  writer.skipRows(fields.rows);
}

/**
 * exceljs' streaming writer fed from a cursor, one batch at a time, the next batch asked
 * for before the current one is written. The writer's own pipeline (sheet XML → zip →
 * deflate) ignores back-pressure, so the loop provides it: before the next batch it waits
 * until the response has taken what was compressed so far and the output buffer is below
 * its mark. A slow client therefore holds at most two batches of rows in this process;
 * the rest waits in PostgreSQL behind the cursor.
 */
async function writeSheetValues(
  output: PassThrough,
  connection: ExportConnection,
  book: XlsxBook,
  request: ExportRequest,
  source: Extract<XlsxRows, { kind: 'values' }>,
): Promise<void> {
  const writeRow = sheetValuesWriter(book, request.columns);
  let next = source.first;
  for (;;) {
    const rows = await next;
    if (connection.gone || output.destroyed) throw new Error('export client went away');
    const last = rows.length < XLSX_BATCH_ROWS;
    // PostgreSQL computes the next batch while this one is written.
    if (!last) next = source.read();
    for (const row of rows) writeRow(row);
    if (last) break;
    await drained(output, book.inputs);
  }
  await source.cursor.close();
}

/** A writable stream as far as back-pressure goes. */
interface Backlogged {
  readonly writableLength: number;
  readonly writableHighWaterMark: number;
  once(event: 'drain', listener: () => void): unknown;
  removeListener(event: 'drain', listener: () => void): unknown;
}

/**
 * A writable stream's backlog. Node's streams have writableLength; the PassThrough the
 * zip puts between the sheet's stream and deflate comes from the readable-stream
 * package (archiver's), whose streams keep it only in _writableState: found by
 * writableLength alone, the deflate input was never watched (in this round's
 * back-pressure test the API then held 31 MB of a paused client's XLSX once).
 */
function asBacklogged(value: unknown): Backlogged | undefined {
  const stream = value as Partial<Backlogged> & {
    _writableState?: { length?: unknown; highWaterMark?: unknown };
  };
  if (typeof stream?.once !== 'function' || typeof stream.removeListener !== 'function') return undefined;
  if (typeof stream.writableLength === 'number' && typeof stream.writableHighWaterMark === 'number')
    return stream as Backlogged;
  const state = stream._writableState;
  if (typeof state?.length !== 'number' || typeof state.highWaterMark !== 'number') return undefined;
  return {
    get writableLength() {
      return state.length as number;
    },
    writableHighWaterMark: state.highWaterMark,
    once: (event, listener) => stream.once?.(event, listener),
    removeListener: (event, listener) => stream.removeListener?.(event, listener),
  };
}

/**
 * The streams that take the sheet's XML to deflate. exceljs' sheet stream writes its
 * 64 KB buffers into them without waiting, and the rows are written synchronously, so
 * without a wait on them the whole uncompressed sheet (56 MB for a 50,000-row page of
 * the reporting export) piled up there whenever deflate fell behind. The sheet stream
 * and its `pipes` are exceljs 4 internals: if they ever change shape, this finds none
 * and only the response's buffer is watched.
 */
function deflateInputs(sheet: ExcelJS.Worksheet): Backlogged[] {
  const pipes = (sheet as unknown as { stream?: { pipes?: unknown } }).stream?.pipes;
  return Array.isArray(pipes)
    ? pipes.map(asBacklogged).filter((stream): stream is Backlogged => stream !== undefined)
    : [];
}

/**
 * Resolves once every stream of the pipeline is below its high-water mark — the XML
 * waiting for deflate, then the response's buffer — after the work already queued
 * upstream (deflate runs on the thread pool) has had its turn; rejects if the response
 * closes.
 */
async function drained(output: PassThrough, inputs: Backlogged[]): Promise<void> {
  for (;;) {
    // Let deflate and the zip hand over what they hold before looking at the buffers.
    await new Promise((resolve) => setImmediate(resolve));
    if (output.destroyed) throw new Error('export client went away');
    const full = inputs.find((input) => input.writableLength >= input.writableHighWaterMark);
    if (full) await drainOrClose(full, output);
    else if (output.writableNeedDrain) await drainOrClose(output, output);
    else return;
  }
}

/**
 * Resolves at the stream's next 'drain' or when the response closes, whichever comes
 * first, and removes the other listener: an export waits hundreds of times, and
 * listeners left behind on the response accumulate.
 */
function drainOrClose(stream: Backlogged, output: PassThrough): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.removeListener('drain', done);
      output.removeListener('close', done);
      resolve();
    };
    stream.once('drain', done);
    output.once('close', done);
  });
}

// Parameter inlining for COPY ------------------------------------------------------------

/** A SQL literal for a parameter value; see the module comment for the rules. */
export function sqlLiteral(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  if (typeof value === 'number') {
    if (!Number.isFinite(value))
      throw new ValidationError('invalid filter: numbers must be finite', 'invalid_parameter');
    return `(${String(value)})`;
  }
  if (typeof value === 'bigint') return `(${value.toString()})`;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new ValidationError('invalid filter: invalid date', 'invalid_parameter');
    return pg.escapeLiteral(value.toISOString());
  }
  if (Buffer.isBuffer(value)) return pg.escapeLiteral(`\\x${value.toString('hex')}`);
  if (Array.isArray(value)) return textLiteral(arrayLiteral(value));
  if (typeof value === 'string') return textLiteral(value);
  return textLiteral(JSON.stringify(value));
}

function textLiteral(text: string): string {
  if (text.includes('\u0000'))
    throw new ValidationError('invalid filter: text must not contain NUL characters', 'invalid_parameter');
  return pg.escapeLiteral(text);
}

/** PostgreSQL's text form of an array: {"a","b",NULL}. */
function arrayLiteral(values: unknown[]): string {
  const items = values.map((item) => {
    if (item === null || item === undefined) return 'NULL';
    if (Array.isArray(item)) return arrayLiteral(item);
    const text =
      item instanceof Date ? item.toISOString() : typeof item === 'object' ? JSON.stringify(item) : String(item);
    return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  });
  return `{${items.join(',')}}`;
}

const IDENTIFIER_CHAR = /[A-Za-z0-9_$\u0080-\uFFFF]/;

/**
 * Replaces `$n` placeholders by literals, leaving quoted strings, quoted identifiers,
 * comments and dollar-quoted bodies untouched.
 */
export function inlineParameters(text: string, values: unknown[]): string {
  let out = '';
  let index = 0;
  const copyUntil = (end: number) => {
    out += text.slice(index, end);
    index = end;
  };
  while (index < text.length) {
    const char = text[index] as string;
    const next = text[index + 1];
    if (char === "'") {
      const escapes =
        index > 0 && /[eE]/.test(text[index - 1] as string) && !IDENTIFIER_CHAR.test(text[index - 2] ?? ' ');
      let cursor = index + 1;
      while (cursor < text.length) {
        if (escapes && text[cursor] === '\\') cursor += 2;
        else if (text[cursor] === "'" && text[cursor + 1] === "'") cursor += 2;
        else if (text[cursor] === "'") break;
        else cursor += 1;
      }
      copyUntil(Math.min(cursor + 1, text.length));
    } else if (char === '"') {
      const end = text.indexOf('"', index + 1);
      copyUntil(end === -1 ? text.length : end + 1);
    } else if (char === '-' && next === '-') {
      const end = text.indexOf('\n', index);
      copyUntil(end === -1 ? text.length : end + 1);
    } else if (char === '/' && next === '*') {
      let depth = 0;
      let cursor = index;
      while (cursor < text.length) {
        if (text[cursor] === '/' && text[cursor + 1] === '*') {
          depth += 1;
          cursor += 2;
        } else if (text[cursor] === '*' && text[cursor + 1] === '/') {
          depth -= 1;
          cursor += 2;
          if (depth === 0) break;
        } else cursor += 1;
      }
      copyUntil(cursor);
    } else if (char === '$' && !IDENTIFIER_CHAR.test(text[index - 1] ?? ' ')) {
      const placeholder = /^\$(\d+)/.exec(text.slice(index));
      if (placeholder) {
        const position = Number(placeholder[1]);
        if (position < 1 || position > values.length)
          throw new Error(`export query uses $${position} but has ${values.length} values`);
        out += sqlLiteral(values[position - 1]);
        index += placeholder[0].length;
        continue;
      }
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(index));
      if (tag) {
        const end = text.indexOf(tag[0], index + tag[0].length);
        copyUntil(end === -1 ? text.length : end + tag[0].length);
      } else copyUntil(index + 1);
    } else {
      copyUntil(index + 1);
    }
  }
  return out;
}
