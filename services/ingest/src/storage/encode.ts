/**
 * Hand-written encoders for the two bulk-write paths: PostgreSQL array literals (one
 * text parameter per column for `unnest`) and COPY text rows. node-postgres' generic
 * array serialiser quotes and regex-escapes every element; doing it per column kind is
 * what makes `unnest` as fast as COPY here (measured in test/bench/ingest.ts).
 */

export type ColumnKind =
  | 'uuid'
  | 'text'
  | 'timestamptz'
  | 'float8'
  | 'float4'
  | 'int2'
  | 'int4'
  | 'int8'
  | 'bool'
  | 'bytea';

export interface Column {
  name: string;
  kind: ColumnKind;
}

/** A cell: timestamps are epoch milliseconds, bytea a Buffer, null is SQL NULL. */
export type Cell = string | number | boolean | Buffer | null | undefined;

let lastMs = Number.NaN;
let lastIso = '';
/** Consecutive rows mostly share a millisecond (receive times): cache the last one. */
function iso(ms: number): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

const ARRAY_QUOTE = /["\\]/g;
const COPY_ESCAPE = /[\\\t\n\r]/g;
const copyEscapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function plain(kind: ColumnKind, value: Exclude<Cell, null | undefined>): string {
  switch (kind) {
    case 'timestamptz':
      return iso(value as number);
    case 'bool':
      return value ? 't' : 'f';
    default:
      return String(value);
  }
}

function arrayElement(kind: ColumnKind, value: Cell): string {
  if (value === null || value === undefined) return 'NULL';
  if (kind === 'text') return `"${(value as string).replace(ARRAY_QUOTE, '\\$&')}"`;
  if (kind === 'bytea') return `"\\\\x${(value as Buffer).toString('hex')}"`;
  return plain(kind, value);
}

/** `{a,b,NULL}` for `$n::kind[]`. */
export function arrayLiteral(kind: ColumnKind, values: Cell[]): string {
  const parts = new Array<string>(values.length);
  for (let index = 0; index < values.length; index += 1) parts[index] = arrayElement(kind, values[index]);
  return `{${parts.join(',')}}`;
}

/** One array literal per column, in column order, for `unnest($1::…[], $2::…[], …)`. */
export function columnArrays(columns: readonly Column[], rows: readonly Cell[][]): string[] {
  return columns.map((column, index) =>
    arrayLiteral(
      column.kind,
      rows.map((row) => row[index]),
    ),
  );
}

/** `unnest($1::uuid[], $2::text[], …)` for the columns. */
export function unnestCall(columns: readonly Column[], offset = 0): string {
  return `unnest(${columns.map((column, index) => `$${index + 1 + offset}::${column.kind}[]`).join(', ')})`;
}

function copyCell(kind: ColumnKind, value: Cell): string {
  if (value === null || value === undefined) return '\\N';
  if (kind === 'text') return (value as string).replace(COPY_ESCAPE, (char) => copyEscapes[char]!);
  if (kind === 'bytea') return `\\\\x${(value as Buffer).toString('hex')}`;
  return plain(kind, value);
}

/** The rows in COPY text format (tab-separated, `\N` for NULL). */
export function copyText(columns: readonly Column[], rows: readonly Cell[][]): string {
  let out = '';
  for (const row of rows) {
    for (let index = 0; index < columns.length; index += 1) {
      if (index > 0) out += '\t';
      out += copyCell(columns[index]!.kind, row[index]);
    }
    out += '\n';
  }
  return out;
}
