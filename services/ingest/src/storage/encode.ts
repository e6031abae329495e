/**
 * Hand-written encoders for the bulk-write paths: array parameters for `unnest` and the
 * bronze batch row (one binary parameter per column, see binaryArray), COPY binary rows
 * for silver, and text forms (array literals, COPY text) where a statement or the
 * benchmark needs text. node-postgres' generic array serialiser quotes and regex-escapes
 * every element and the server then parses it back.
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

/** A cell: timestamps are epoch milliseconds, bytea a Buffer (text may be one: UTF-8 bytes), null is SQL NULL. */
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

/** One binary array per column, in column order, for `unnest($1::…[], $2::…[], …)`. */
export function columnArrays(columns: readonly Column[], rows: readonly Cell[][]): Buffer[] {
  return columns.map((column, index) =>
    binaryArray(
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

const PG_EPOCH_MS = 946_684_800_000;
const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

function binarySize(kind: ColumnKind, value: Exclude<Cell, null | undefined>): number {
  switch (kind) {
    case 'uuid':
      return 16;
    case 'text':
      // A Buffer holds text already encoded (a bronze payload, valid UTF-8).
      return Buffer.isBuffer(value) ? value.length : Buffer.byteLength(value as string, 'utf8');
    case 'bytea':
      return (value as Buffer).length;
    case 'timestamptz':
    case 'float8':
    case 'int8':
      return 8;
    case 'float4':
    case 'int4':
      return 4;
    case 'int2':
      return 2;
    case 'bool':
      return 1;
  }
}

/**
 * Binary uuids by their text: a batch's rows repeat a few hundred device, tenant and
 * asset ids, so each is converted once rather than once per cell (the conversion
 * allocated a string per cell). Bounded: cleared when it holds too many.
 */
const uuidBytes = new Map<string, Buffer>();
const UUID_CACHE_SIZE = 65_536;

function uuidBuffer(value: string): Buffer {
  let bytes = uuidBytes.get(value);
  if (bytes === undefined) {
    bytes = Buffer.from(value.replaceAll('-', ''), 'hex');
    if (bytes.length !== 16) throw new TypeError(`not a uuid: ${value}`);
    if (uuidBytes.size >= UUID_CACHE_SIZE) uuidBytes.clear();
    uuidBytes.set(value, bytes);
  }
  return bytes;
}

const TWO_32 = 4_294_967_296;

/** A 64-bit integer without a BigInt per value when it is a safe integer (every timestamp is). */
function writeInt64(buffer: Buffer, value: number, offset: number): number {
  if (!Number.isSafeInteger(value)) return buffer.writeBigInt64BE(BigInt(value), offset);
  const high = Math.floor(value / TWO_32);
  buffer.writeInt32BE(high, offset);
  return buffer.writeUInt32BE(value - high * TWO_32, offset + 4);
}

function writeBinary(buffer: Buffer, offset: number, kind: ColumnKind, value: Exclude<Cell, null | undefined>): number {
  switch (kind) {
    case 'uuid':
      return offset + uuidBuffer(value as string).copy(buffer, offset);
    case 'text':
      if (Buffer.isBuffer(value)) return offset + value.copy(buffer, offset);
      return offset + buffer.write(value as string, offset, 'utf8');
    case 'bytea':
      return offset + (value as Buffer).copy(buffer, offset);
    case 'timestamptz':
      // Microseconds since 2000-01-01 UTC; epoch milliseconds are integers, so this is exact.
      return writeInt64(buffer, Math.round(((value as number) - PG_EPOCH_MS) * 1000), offset);
    case 'int8':
      return writeInt64(buffer, value as number, offset);
    case 'float8':
      return buffer.writeDoubleBE(value as number, offset);
    case 'float4':
      return buffer.writeFloatBE(value as number, offset);
    case 'int4':
      return buffer.writeInt32BE(value as number, offset);
    case 'int2':
      return buffer.writeInt16BE(value as number, offset);
    case 'bool':
      return buffer.writeUInt8(value ? 1 : 0, offset);
  }
}

/**
 * The rows in COPY binary format: no text to parse on the server (timestamps, floats and
 * uuids arrive as their binary values), one buffer sized in a first pass.
 */
export function copyBinary(columns: readonly Column[], rows: readonly Cell[][]): Buffer {
  let size = COPY_SIGNATURE.length + 8 + 2;
  for (const row of rows) {
    size += 2 + 4 * columns.length;
    for (let index = 0; index < columns.length; index += 1) {
      const value = row[index];
      if (value !== null && value !== undefined) size += binarySize(columns[index]!.kind, value);
    }
  }
  const buffer = Buffer.allocUnsafe(size);
  let offset = COPY_SIGNATURE.copy(buffer, 0);
  offset = buffer.writeInt32BE(0, offset);
  offset = buffer.writeInt32BE(0, offset);
  for (const row of rows) {
    offset = buffer.writeInt16BE(columns.length, offset);
    for (let index = 0; index < columns.length; index += 1) {
      const value = row[index];
      if (value === null || value === undefined) {
        offset = buffer.writeInt32BE(-1, offset);
        continue;
      }
      const start = offset + 4;
      const end = writeBinary(buffer, start, columns[index]!.kind, value);
      buffer.writeInt32BE(end - start, offset);
      offset = end;
    }
  }
  offset = buffer.writeInt16BE(-1, offset);
  if (offset !== size) throw new RangeError(`COPY binary encoding wrote ${offset} of ${size} bytes`);
  return buffer;
}

/** Element type oids of the binary array header (pg_type), which array_recv checks. */
const elementOids: Record<ColumnKind, number> = {
  bool: 16,
  bytea: 17,
  int8: 20,
  int2: 21,
  int4: 23,
  text: 25,
  float4: 700,
  float8: 701,
  timestamptz: 1184,
  uuid: 2950,
};

/**
 * A one-dimensional array in PostgreSQL's binary format, for a `$n::kind[]` parameter:
 * node-postgres sends a Buffer parameter in binary, so the server reads each element as
 * its binary value (array_recv) instead of parsing a literal, and nothing is quoted or
 * escaped here: a bronze payload goes in as its bytes.
 */
export function binaryArray(kind: ColumnKind, values: readonly Cell[]): Buffer {
  let size = 20 + 4 * values.length;
  let nulls = 0;
  for (const value of values) {
    if (value === null || value === undefined) nulls = 1;
    else size += binarySize(kind, value);
  }
  const buffer = Buffer.allocUnsafe(size);
  let offset = buffer.writeInt32BE(1, 0);
  offset = buffer.writeInt32BE(nulls, offset);
  offset = buffer.writeUInt32BE(elementOids[kind], offset);
  offset = buffer.writeInt32BE(values.length, offset);
  offset = buffer.writeInt32BE(1, offset);
  for (const value of values) {
    if (value === null || value === undefined) {
      offset = buffer.writeInt32BE(-1, offset);
      continue;
    }
    const start = offset + 4;
    const end = writeBinary(buffer, start, kind, value);
    buffer.writeInt32BE(end - start, offset);
    offset = end;
  }
  if (offset !== size) throw new RangeError(`binary array encoding wrote ${offset} of ${size} bytes`);
  return buffer;
}
