import type { ExportColumn } from '../../http/export.ts';
import type { ApiKeyAuth } from '../../http/auth.ts';

export type SqlType = 'uuid' | 'text' | 'timestamptz' | 'boolean' | 'integer' | 'float8' | 'uuid[]' | 'text[]';

/**
 * Collects positional parameters while a statement is assembled from optional filters.
 * Every placeholder carries its cast, so the statement also runs as COPY with the values
 * inlined as literals (the export module's rule).
 */
export class SqlParams {
  readonly values: unknown[] = [];

  /** Adds a value and returns its placeholder ($n::type). */
  add(value: unknown, type: SqlType): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }
}

/** Who is asking: the tenant and, for customer-scoped keys, the one customer they see. */
export interface TelemetryScope {
  tenantId: string;
  customerName: string | null;
}

export function scopeOf(auth: ApiKeyAuth): TelemetryScope {
  return { tenantId: auth.tenantId, customerName: auth.customerName };
}

/** The `scope` block of responses. */
export function scopeBlock(scope: TelemetryScope) {
  return { customerName: scope.customerName, customerScoped: scope.customerName !== null };
}

/**
 * The condition every telemetry query puts on the asset alias `a`: the key's tenant and,
 * for a customer key, exact equality of the asset's customer name (the spec's rule).
 */
export function assetScopeCondition(params: SqlParams, scope: TelemetryScope, alias = 'a'): string {
  const tenant = `${alias}.tenant_id = ${params.add(scope.tenantId, 'uuid')}`;
  if (scope.customerName === null) return tenant;
  return `${tenant} AND ${alias}.customer_name = ${params.add(scope.customerName, 'text')}`;
}

/** The asset `a` matches a search: its name, identifier or display code, or one of its devices' ids. */
export function assetSearchCondition(params: SqlParams, q: string, alias = 'a'): string {
  const pattern = params.add(likePattern(q), 'text');
  return `(${alias}.search_text LIKE ${pattern} OR EXISTS (SELECT 1 FROM devices sd WHERE sd.asset_id = ${alias}.id AND lower(sd.device_id) LIKE ${pattern}))`;
}

/** Escapes LIKE wildcards so a search for "50%" finds that text. */
export function likePattern(search: string): string {
  return `%${search.toLowerCase().replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

/** A column of a telemetry list: one definition serves the JSON page and the export. */
export interface Column {
  /** The field name; also the CSV/XLSX header. */
  name: string;
  /** SQL expression over the statement's aliases. */
  sql: string;
  type: 'text' | 'int' | 'number' | 'bool' | 'time';
}

/** The select list of a statement: each column under its field name. */
export function selectList(columns: Column[]): string {
  return columns.map((column) => `${column.sql} AS "${column.name}"`).join(',\n       ');
}

const exportTypes = { text: 'text', int: 'integer', number: 'number', bool: 'boolean', time: 'timestamp' } as const;

/** The columns as the export module takes them (it renders times and booleans). */
export function exportColumns(columns: Column[]): ExportColumn[] {
  return columns.map((column) => ({ name: column.name, type: exportTypes[column.type] }));
}

/** The AssetRef columns, flattened (alias `a` = assets, `t` = asset_types). */
export const assetRefColumns: Column[] = [
  { name: 'assetId', sql: 'a.id', type: 'text' },
  { name: 'assetIdentifier', sql: 'a.identifier', type: 'text' },
  { name: 'assetName', sql: 'a.name', type: 'text' },
  { name: 'assetDisplayCode', sql: 'a.display_code', type: 'text' },
  { name: 'assetType', sql: "coalesce(t.name, '')", type: 'text' },
  { name: 'assetLocation', sql: 'a.location', type: 'text' },
  { name: 'assetCustomerName', sql: 'a.customer_name', type: 'text' },
];

export type Row = Record<string, unknown>;

/** AssetRef of the spec from the flattened columns above. */
export function toAssetRef(row: Row) {
  return {
    id: row.assetId as string,
    identifier: row.assetIdentifier as string,
    name: row.assetName as string,
    displayCode: row.assetDisplayCode as string,
    assetType: row.assetType as string,
    location: row.assetLocation as string,
    customerName: row.assetCustomerName as string,
  };
}

/**
 * `round((numericSql)::numeric, digits)::float8`, the rounding the lists and exports show,
 * without its two casts through text when they cannot change the answer. float8 → numeric
 * prints 15 significant digits and parses them, numeric → float8 prints and parses again:
 * about 2 µs per value, half of the usage-sessions export statement's time.
 *
 * With y = value × 10^digits in float8: when |y| < 1e9 and y is more than 1e-4 from a
 * tie (k + 0.5), both the numeric rounding and round(y) pick the same integer n (the
 * 15-digit text and the float8 product are within 1e-5 of the exact y), and n / 10^digits
 * in float8 is the double nearest to that decimal, which is what the cast back finds: the
 * same float8, bit for bit (`+ 0.0` turns round's −0 into the numeric path's 0). Near a
 * tie, out of range, NaN or infinite, the numeric expression runs. `float8Sql` is the
 * same quantity in float8 when `(numericSql)::float8` would itself be a numeric cast.
 */
export function roundedFloat8(numericSql: string, digits: number, float8Sql = `(${numericSql})::float8`): string {
  const scaled = `((${float8Sql}) * ${10 ** digits}::float8)`;
  return `CASE WHEN abs(${scaled}) < 1e9::float8 AND abs(${scaled} - floor(${scaled}) - 0.5::float8) > 1e-4::float8
        THEN round(${scaled}) / ${10 ** digits}::float8 + 0.0::float8
        ELSE round((${numericSql})::numeric, ${digits})::float8 END`;
}

/** ContainerWorkSummary columns (flattened) over a row source with the given column names. */
export function containerWorkColumns(source: {
  cycles: string;
  loadedSeconds: string;
  emptySeconds: string;
  loadedDistance: string;
  emptyDistance: string;
}): Column[] {
  return [
    { name: 'containerCycleCount', sql: `(${source.cycles})::bigint`, type: 'int' },
    { name: 'loadedSeconds', sql: `round(${source.loadedSeconds})::bigint`, type: 'int' },
    { name: 'emptySeconds', sql: `round(${source.emptySeconds})::bigint`, type: 'int' },
    { name: 'loadedDistanceM', sql: roundedFloat8(source.loadedDistance, 1), type: 'number' },
    { name: 'emptyDistanceM', sql: roundedFloat8(source.emptyDistance, 1), type: 'number' },
    {
      name: 'loadedPercent',
      sql: `CASE WHEN (${source.loadedSeconds}) + (${source.emptySeconds}) > 0
        THEN ${roundedFloat8(
          `(${source.loadedSeconds}) * 100.0 / ((${source.loadedSeconds}) + (${source.emptySeconds}))`,
          2,
          `(${source.loadedSeconds})::float8 * 100 / ((${source.loadedSeconds}) + (${source.emptySeconds}))::float8`,
        )} ELSE 0 END`,
      type: 'number',
    },
  ];
}

export function toContainerWork(row: Row) {
  return {
    containerCycleCount: row.containerCycleCount as number,
    emptyDistanceM: row.emptyDistanceM as number,
    emptySeconds: row.emptySeconds as number,
    loadedDistanceM: row.loadedDistanceM as number,
    loadedPercent: row.loadedPercent as number,
    loadedSeconds: row.loadedSeconds as number,
  };
}

/** A number rounded for display (percentages, metres); NaN and infinities become 0. */
export function round(value: number, digits = 2): number {
  if (!Number.isFinite(value)) return 0;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** part / whole × 100, 0 when the whole is 0. */
export function percent(part: number, whole: number): number {
  return whole > 0 ? round((part / whole) * 100) : 0;
}

/**
 * A list as one statement: the columns, FROM … WHERE …, and a total order (ties broken
 * by a unique key) so pages and export chunks never skip or repeat a row.
 */
export interface ListStatement {
  tag: string;
  columns: Column[];
  /** `FROM … WHERE …`, with placeholders from `params`. */
  body: string;
  orderBy: string;
  params: SqlParams;
  /**
   * The same list as a "late join": the page is picked from the main table alone
   * (`inner`, aliased `alias`, ordered and limited there) and only its rows are joined
   * (`joins`), so a deep page does not join every row it skips.
   */
  deferred?: { inner: string; alias: string; joins: string };
}

/** One JSON page of the statement. */
export function pageSql(statement: ListStatement, limit: number, offset: number): { text: string; values: unknown[] } {
  const values = [...statement.params.values, limit, offset];
  const paging = `LIMIT $${values.length - 1}::bigint OFFSET $${values.length}::bigint`;
  if (statement.deferred) {
    const { inner, alias, joins } = statement.deferred;
    return {
      text: `/* api:${statement.tag} */
SELECT ${selectList(statement.columns)}
FROM (${inner}
      ORDER BY ${statement.orderBy}
      ${paging}) ${alias}
${joins}
ORDER BY ${statement.orderBy}`,
      values,
    };
  }
  return { text: `${orderedSql(statement).text}\n${paging}`, values };
}

/** The whole ordered statement, as the export module pages it. */
export function orderedSql(statement: ListStatement): { text: string; values: unknown[] } {
  return {
    text: `/* api:${statement.tag} */
SELECT ${selectList(statement.columns)}
${statement.body}
ORDER BY ${statement.orderBy}`,
    values: [...statement.params.values],
  };
}
