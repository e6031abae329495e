/**
 * Sheet rows rendered by PostgreSQL: the XML exceljs' row renderer writes for the
 * export's cells, produced by the page's own statement, so the API only moves bytes
 * from the database socket into the zip.
 *
 * Rendering rows in the API (exceljs' RowXform, xlsx-rows.ts) was the XLSX export's
 * bottleneck: every cell as a dozen string pieces joined, each row turned into a
 * Buffer, pg's decoding of the rows before that, all on the API's one thread. Here the
 * statement `sheetRowsStatement` builds runs as `COPY (…) TO STDOUT (FORMAT binary)`:
 * one text field per data row, read as raw bytes (`CopyBinaryFields`) and written to the
 * sheet's stream as they are. The work moves to a PostgreSQL backend, i.e. the other
 * core.
 *
 * The XML is exceljs' byte for byte (test/reporting/export-xlsx-xml.test.ts compares it
 * with exceljs' own output over edge values):
 *
 *   <row r="N" spans="1:W" x14ac:dyDescent="0.25"> cells </row>
 *   text     <c r="AN" t="str"><v>escaped text</v></c>
 *   number   <c r="AN"><v>JavaScript's String(number)</v></c>
 *   date     <c r="AN" s="S"><v>Excel serial: 25569 + ms / 86400000</v></c>
 *   null     nothing, or <c r="AN" s="S"/> for a styled (date) column
 *
 * a row without a value is left out (its number is still used), as exceljs does. Text is
 * escaped as exceljs' xmlEncode does (& < > " '); the characters XML cannot carry, which
 * export.ts' cellText and xmlEncode remove, are removed from the bytes by
 * `CopyBinaryFields` (a byte scan in the API is far cheaper than translate() in SQL for
 * every text value, and the XML around the values holds none of them); a text longer
 * than a cell holds is cleaned and cut to 32,767 UTF-16 units in SQL, as cellText does.
 * Numbers: PostgreSQL's float8 output (extra_float_digits 1, the default, set for the
 * export's transaction) prints the shortest digits that read back to the same double,
 * as JavaScript does; the layout differs — PostgreSQL uses an exponent below 1e-4 and
 * from 1e15 on (`1e-05`, `1e+15`), JavaScript below 1e-6 and from 1e21 on (`0.00001`,
 * `1e-7`) — so values outside [1e-4, 1e15) are re-laid out in SQL. From 2^53 on the
 * digits can differ too: where a shortest decimal lies exactly halfway between two
 * doubles (1e23) JavaScript takes it and PostgreSQL prints one digit more
 * (9.999999999999999e+22); both read back as the same double (the test compares that).
 *
 * The statement runs with JIT off: compiling the row expression took 10-20 s.
 *
 * Each column's PostgreSQL type decides what exceljs would have been given (pg's parsing
 * of that type and export.ts' cellValue); a combination this module does not render
 * (untyped timestamps or JSON, arrays, enums, …) makes `sheetRowsStatement` return
 * undefined and the export uses exceljs' renderer instead.
 */
import { Transform, type TransformCallback } from 'node:stream';
import pg from 'pg';

/** The cell types and styles of the columns, as exceljs' styles registry numbers them. */
export interface SheetStyleIds {
  /** Style id of plain cells (text, numbers); 0 writes no `s` attribute. */
  plain: number;
  /** Style id of date cells and of empty cells of a date column. */
  date: number;
}

/** `plain` is text that needs no escaping (a uuid's hex digits and dashes). */
export type SheetColumnKind = 'text' | 'plain' | 'number' | 'date' | 'boolean';

/** What a column becomes in the sheet; `source` is a SQL expression over `export_page`. */
export interface SheetColumn {
  kind: SheetColumnKind;
  /** Expression giving text (text, boolean), float8 (number) or a timestamp (date). */
  source: string;
}

/** PostgreSQL type OIDs (pg_type) this module knows how pg hands to JavaScript. */
const OID = {
  bool: 16,
  int8: 20,
  int2: 21,
  int4: 23,
  text: 25,
  oid: 26,
  float4: 700,
  float8: 701,
  varchar: 1043,
  date: 1082,
  timestamp: 1114,
  timestamptz: 1184,
  numeric: 1700,
  uuid: 2950,
} as const;

/** Export column types as export.ts declares them (kept here to avoid an import cycle). */
type ExportColumnType = 'text' | 'integer' | 'number' | 'boolean' | 'timestamp' | 'json';

/**
 * How a column of the given declared type and PostgreSQL type reaches the sheet, the way
 * the exceljs path would write it; undefined when this module cannot reproduce it.
 */
export function sheetColumn(
  name: string,
  type: ExportColumnType | undefined,
  typeOid: number,
): SheetColumn | undefined {
  const ref = `export_page.${pg.escapeIdentifier(name)}`;
  switch (type) {
    case 'timestamp':
      // export.ts reads these as epoch milliseconds (xlsxProjection).
      return typeOid === OID.timestamptz || typeOid === OID.timestamp || typeOid === OID.date
        ? { kind: 'date', source: ref }
        : undefined;
    case 'integer':
    case 'number':
      // Number(text) in JavaScript is the correctly rounded double, as the casts are;
      // float4 goes through its (shortest) text as pg's parseFloat does.
      if (typeOid === OID.float4) return { kind: 'number', source: `${ref}::text::float8` };
      return numericOids.has(typeOid) ? { kind: 'number', source: `${ref}::float8` } : undefined;
    case 'boolean':
      return typeOid === OID.bool ? { kind: 'boolean', source: ref } : undefined;
    case 'json':
      return { kind: 'text', source: `${ref}::text` };
    default:
      // Untyped: what pg parses the type to decides (strings stay text; numbers, int8
      // and numeric included — @gantry/db's pool parses those with Number() — become
      // numbers; booleans print as true/false).
      if (typeOid === OID.bool) return { kind: 'boolean', source: ref };
      if (numericOids.has(typeOid)) return { kind: 'number', source: `${ref}::float8` };
      if (typeOid === OID.float4) return { kind: 'number', source: `${ref}::text::float8` };
      if (typeOid === OID.uuid) return { kind: 'plain', source: `${ref}::text` };
      if (textOids.has(typeOid)) return { kind: 'text', source: `${ref}::text` };
      return undefined;
  }
}

const numericOids = new Set<number>([OID.int2, OID.int4, OID.int8, OID.oid, OID.float8, OID.numeric]);
/** Types pg hands over as their PostgreSQL text. */
const textOids = new Set<number>([OID.text, OID.varchar]);

/** Spreadsheet column letters: A … Z, AA … */
export function columnLetters(count: number): string[] {
  return Array.from({ length: count }, (_, index) => {
    let letters = '';
    for (let n = index + 1; n > 0; n = Math.floor((n - 1) / 26)) {
      letters = String.fromCharCode(65 + ((n - 1) % 26)) + letters;
    }
    return letters;
  });
}

const literal = (text: string) => pg.escapeLiteral(text);

/** Characters export.ts' cellText removes (XML 1.0 cannot carry them). */
const XML_INVALID_CODES = [
  ...Array.from({ length: 8 }, (_, index) => index + 1),
  0x0b,
  0x0c,
  ...Array.from({ length: 0x1f - 0x0e + 1 }, (_, index) => index + 0x0e),
  0xfffe,
  0xffff,
];
const XML_INVALID_SQL = XML_INVALID_CODES.map((code) => `chr(${code})`).join(' || ');

/**
 * cellText's cut of `clean` (a column reference; XML-invalid characters already removed)
 * to 32,767 UTF-16 units, as JavaScript's slice does. Only a text of more than 16,383
 * characters can be that long; for those the units are counted character by character
 * (rare, and bounded by the first 32,767 characters). A cut through a surrogate pair
 * leaves a lone high surrogate, which the UTF-8 encoder writes as U+FFFD: so does this.
 */
function cutTextSql(text: string): string {
  const clean = `translate(${text}, ${XML_INVALID_SQL}, '')`;
  const cut = `(SELECT string_agg(u.ch, '' ORDER BY u.i) FILTER (WHERE u.units <= 32767)
                       || CASE WHEN bool_or(u.units = 32768 AND u.width = 2) THEN chr(65533) ELSE '' END
                  FROM (SELECT c.ch, c.i, c.width, sum(c.width) OVER (ORDER BY c.i) AS units
                          FROM (SELECT s.ch, s.i, CASE WHEN ascii(s.ch) > 65535 THEN 2 ELSE 1 END AS width
                                  FROM regexp_split_to_table(left(${clean}, 32767), '') WITH ORDINALITY AS s(ch, i)) c) u)`;
  return `CASE WHEN length(${text}) <= 16383 THEN ${text} ELSE ${cut} END`;
}

/** exceljs' xmlEncode of a text cell's value (its control characters are gone already). */
function xmlEncodeSql(text: string): string {
  let sql = text;
  for (const [char, entity] of [
    ['&', '&amp;'],
    ['<', '&lt;'],
    ['>', '&gt;'],
    ['"', '&quot;'],
    ["'", '&apos;'],
  ] as const) {
    sql = `replace(${sql}, ${literal(char)}, ${literal(entity)})`;
  }
  return sql;
}

/**
 * JavaScript's String(x) of a float8 expression `x` (a plain column reference: it is
 * repeated). Zero (and −0) is "0"; [1e-4, 1e15) prints alike; the rest is re-laid out
 * from PostgreSQL's exponent form; NaN and ±Infinity print alike.
 */
export function jsNumberSql(x: string): string {
  const relaid = `(SELECT CASE
            WHEN p.m IS NULL THEN p.t
            WHEN p.e >= 21 OR p.e <= -7
              THEN p.m[1] || p.m[2] || coalesce('.' || p.m[3], '') || 'e' || CASE WHEN p.e > 0 THEN '+' ELSE '-' END || abs(p.e)
            WHEN p.e < 0 THEN p.m[1] || '0.' || repeat('0', -p.e - 1) || p.d
            WHEN length(p.d) <= p.e + 1 THEN p.m[1] || p.d || repeat('0', p.e + 1 - length(p.d))
            ELSE p.m[1] || left(p.d, p.e + 1) || '.' || substr(p.d, p.e + 2)
          END
     FROM (SELECT r.t, r.m, r.m[4]::int AS e, r.m[2] || coalesce(r.m[3], '') AS d
             FROM (SELECT q.t, regexp_match(q.t, '^(-?)(\\d)(?:\\.(\\d+))?e([-+]\\d+)$') AS m
                     FROM (SELECT ${x}::text AS t) q) r) p)`;
  return `CASE WHEN ${x} = 0 THEN '0' WHEN abs(${x}) >= 1e-4 AND abs(${x}) < 1e15 THEN ${x}::text ELSE ${relaid} END`;
}

/**
 * The statement of one sheet row per page row, as text (a row without a value is the
 * empty string). `page` is the page as a FROM item named export_page
 * (`(… LIMIT … OFFSET …) AS export_page`); the first data row is row `firstRow`.
 *
 * Three levels, each computing what the next reads several times once: the page's
 * values cleaned and cast (its window function keeps it from being merged upwards),
 * then text cut and escaped and times as serials (`OFFSET 0` keeps it apart), then the
 * cells.
 */
export function sheetRowsStatement(
  page: string,
  columns: SheetColumn[],
  styles: SheetStyleIds,
  firstRow: number,
): string {
  const letters = columnLetters(columns.length);
  const styleAttr = (id: number) => (id ? ` s="${id}"` : '');
  const read = columns.map((column, index) => {
    const alias = `v${index}`;
    switch (column.kind) {
      case 'date':
        // export.ts' xlsxProjection: whole epoch milliseconds as float8.
        return `floor(extract(epoch FROM ${column.source}) * 1000)::float8 AS ${alias}`;
      case 'text':
        return `${column.source} AS ${alias}`;
      case 'boolean':
        return `CASE WHEN ${column.source} THEN 'true' WHEN NOT ${column.source} THEN 'false' END AS ${alias}`;
      default:
        return `${column.source} AS ${alias}`;
    }
  });
  const prepared = columns.map((column, index) => {
    const value = `a.v${index}`;
    const alias = `v${index}`;
    switch (column.kind) {
      case 'date':
        // new Date(ms) and exceljs' dateToExcel; ±infinity is an empty cell, a finite
        // time outside JavaScript's Date range an Invalid Date (NaN).
        return `CASE WHEN abs(${value}) <= 8.64e15 THEN 25569 + ${value} / 86400000
                     WHEN abs(${value}) < 'Infinity'::float8 THEN 'NaN'::float8 END AS ${alias}`;
      case 'text':
        return `${xmlEncodeSql(cutTextSql(value))} AS ${alias}`;
      default:
        return `${value} AS ${alias}`;
    }
  });
  const cells = columns.map((column, index) => {
    const value = `b.v${index}`;
    const open = `'<c r="${letters[index]}' || b.n || '"`;
    const styled = column.kind === 'date' ? styles.date : styles.plain;
    const empty = styled ? `${open}${styleAttr(styled)}/>'` : `''`;
    switch (column.kind) {
      case 'date':
      case 'number':
        return `CASE WHEN ${value} IS NOT NULL THEN ${open}${styleAttr(styled)}><v>' || ${jsNumberSql(value)} || '</v></c>' ELSE ${empty} END`;
      default:
        return `CASE WHEN ${value} IS NOT NULL THEN ${open}${styleAttr(styled)} t="str"><v>' || ${value} || '</v></c>' ELSE ${empty} END`;
    }
  });
  const allEmpty = columns.map((_, index) => `b.v${index} IS NULL`).join(' AND ');
  const open = `'<row r="' || b.n || '" spans="1:${columns.length}" x14ac:dyDescent="0.25">'`;
  return `SELECT CASE WHEN ${allEmpty} THEN '' ELSE ${open}
            || ${cells.join('\n            || ')}
            || '</row>' END
    FROM (SELECT a.n, ${prepared.join(',\n ')}
            FROM (SELECT (row_number() OVER () + ${firstRow - 1})::text AS n, ${read.join(',\n ')}
                    FROM ${page}) AS a
          OFFSET 0) AS b`;
}

/**
 * Bytes of UTF-8 text that are characters XML 1.0 cannot carry and that exceljs leaves
 * out (export.ts' cellText and exceljs' xmlEncode): C0 controls but tab, line feed and
 * carriage return, and DEL. None occurs inside a multi-byte character (those bytes are
 * all ≥ 0x80), so removing them from the bytes is removing the characters. U+FFFE and
 * U+FFFF (EF BF BE, EF BF BF) are removed as well.
 */
const XML_INVALID_BYTES = (() => {
  const table = new Uint8Array(256);
  for (let byte = 0; byte < 0x20; byte += 1) if (byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) table[byte] = 1;
  table[0x7f] = 1;
  table[0xef] = 2;
  return table;
})();

/** The bytes without XML_INVALID_BYTES' characters; the same Buffer when it has none. */
export function removeXmlInvalid(bytes: Buffer): Buffer {
  let first = -1;
  for (let index = 0; index < bytes.length; index += 1) {
    const kind = XML_INVALID_BYTES[bytes[index] as number];
    if (kind === 1 || (kind === 2 && isNonCharacter(bytes, index))) {
      first = index;
      break;
    }
  }
  if (first === -1) return bytes;
  const out = Buffer.allocUnsafe(bytes.length);
  bytes.copy(out, 0, 0, first);
  let length = first;
  for (let index = first; index < bytes.length; index += 1) {
    const byte = bytes[index] as number;
    const kind = XML_INVALID_BYTES[byte];
    if (kind === 1) continue;
    if (kind === 2 && isNonCharacter(bytes, index)) {
      index += 2;
      continue;
    }
    out[length] = byte;
    length += 1;
  }
  return out.subarray(0, length);
}

/** U+FFFE or U+FFFF at index (EF BF BE / EF BF BF). */
function isNonCharacter(bytes: Buffer, index: number): boolean {
  return bytes[index + 1] === 0xbf && (bytes[index + 2] === 0xbe || bytes[index + 2] === 0xbf);
}

const BINARY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/**
 * The fields of `COPY … TO STDOUT (FORMAT binary)` of a one-column statement, as raw
 * bytes: strips the header, each tuple's field count and length, and the trailer, and
 * passes the field bytes of each chunk read on as one Buffer (no decoding). `rows`
 * counts the tuples.
 */
export class CopyBinaryFields extends Transform {
  rows = 0;
  private header = true;
  /** Bytes of field data still to pass on. */
  private remaining = 0;
  /** Bytes of a header, count or length that a chunk boundary split. */
  private carry: Buffer = Buffer.alloc(0);
  /** The last bytes passed on that may start U+FFFE or U+FFFF (EF, EF BF). */
  private tail: Buffer = Buffer.alloc(0);
  private ended = false;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.pushClean(this.parse(chunk), false);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    this.pushClean([], true);
    callback(this.ended ? null : new Error('binary COPY ended before its trailer'));
  }

  /**
   * Passes the fields' bytes of one input chunk on as one Buffer (one write downstream
   * per chunk, not per row), without the characters XML cannot carry (see
   * XML_INVALID_BYTES). The fields are complete UTF-8 texts written one after the other,
   * so the bytes are cleaned as one stream: only a split EF or EF BF at its end is held
   * back for the next chunk.
   */
  private pushClean(pieces: Buffer[], last: boolean): void {
    if (this.tail.length > 0) pieces.unshift(this.tail);
    const bytes = pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces);
    this.tail = Buffer.alloc(0);
    let end = bytes.length;
    if (!last) {
      if (end >= 2 && bytes[end - 2] === 0xef && bytes[end - 1] === 0xbf) end -= 2;
      else if (end >= 1 && bytes[end - 1] === 0xef) end -= 1;
      if (end < bytes.length) this.tail = Buffer.from(bytes.subarray(end));
    }
    const clean = removeXmlInvalid(end === bytes.length ? bytes : bytes.subarray(0, end));
    if (clean.length > 0) this.push(clean);
  }

  /** The field bytes of the chunk, as slices of it. */
  private parse(input: Buffer): Buffer[] {
    const chunk = this.carry.length > 0 ? Buffer.concat([this.carry, input]) : input;
    this.carry = Buffer.alloc(0);
    const pieces: Buffer[] = [];
    let at = 0;
    for (;;) {
      if (this.remaining > 0) {
        const end = Math.min(chunk.length, at + this.remaining);
        if (end > at) pieces.push(chunk.subarray(at, end));
        this.remaining -= end - at;
        at = end;
        if (this.remaining > 0) return pieces;
      }
      if (at >= chunk.length) return pieces;
      if (this.ended) throw new Error('binary COPY data after its trailer');
      if (this.header) {
        if (chunk.length - at < 19) break;
        if (!chunk.subarray(at, at + 11).equals(BINARY_SIGNATURE)) throw new Error('not a binary COPY stream');
        const extension = chunk.readUInt32BE(at + 15);
        if (chunk.length - at < 19 + extension) break;
        at += 19 + extension;
        this.header = false;
        continue;
      }
      if (chunk.length - at < 2) break;
      const fields = chunk.readInt16BE(at);
      if (fields === -1) {
        this.ended = true;
        at += 2;
        continue;
      }
      if (fields !== 1) throw new Error(`binary COPY tuple with ${fields} fields, expected 1`);
      if (chunk.length - at < 6) break;
      const length = chunk.readInt32BE(at + 2);
      at += 6;
      this.rows += 1;
      this.remaining = Math.max(length, 0);
    }
    this.carry = Buffer.from(chunk.subarray(at));
    return pieces;
  }
}
