import type { Context } from 'koa';
import type { Pool } from '@gantry/db';
import { EXPORT_MAX_ROWS, sendExport, type ExportColumn, type ExportFormat } from '../../http/export.ts';

const arrayTypes: Record<NonNullable<ExportColumn['type']>, string> = {
  text: 'text[]',
  integer: 'bigint[]',
  number: 'float8[]',
  boolean: 'boolean[]',
  timestamp: 'timestamptz[]',
  json: 'jsonb[]',
};

export interface RowExport {
  format: ExportFormat;
  filename: string;
  sheetName: string;
  columns: ExportColumn[];
  /** The rows of this page, in order (at most EXPORT_MAX_ROWS are sent). */
  rows: Array<Record<string, unknown>>;
  /** Offset of the first row within the whole result. */
  offset: number;
  /** Whether rows remain after this page. */
  truncated: boolean;
}

/**
 * Sends one export page whose rows were computed in the application (utilization and
 * container work come from the gold read module, which answers rows, not a statement).
 * The page goes through the shared export module as `unnest` of one array per column —
 * so CSV still leaves through COPY and XLSX through the streaming writer — and the
 * paging headers are then set for the page's real position in the whole result.
 */
export async function sendRowExport(ctx: Context, pool: Pool, page: RowExport): Promise<void> {
  const rows = page.rows.slice(0, EXPORT_MAX_ROWS);
  const values = page.columns.map((column) => rows.map((row) => row[column.name] ?? null));
  const arrays = page.columns.map((column, index) => `$${index + 1}::${arrayTypes[column.type ?? 'text']}`).join(', ');
  const names = page.columns.map((column) => `"${column.name}"`).join(', ');
  await sendExport(ctx, pool, {
    format: page.format,
    filename: page.filename,
    sheetName: page.sheetName,
    columns: page.columns,
    query: {
      text: `/* api:${page.filename} */ SELECT * FROM unnest(${arrays}) WITH ORDINALITY AS page(${names}, position) ORDER BY position`,
      values,
    },
    offset: 0,
  });
  const base = page.filename.replace(/[^A-Za-z0-9._-]+/g, '_');
  ctx.set('Content-Disposition', `attachment; filename="${base}${page.offset > 0 ? `-offset-${page.offset}` : ''}.${page.format}"`);
  ctx.set('X-Export-Offset', String(page.offset));
  ctx.set('X-Export-Truncated', page.truncated ? 'true' : 'false');
  if (page.truncated) ctx.set('X-Next-Offset', String(page.offset + EXPORT_MAX_ROWS));
  else ctx.remove('X-Next-Offset');
}
