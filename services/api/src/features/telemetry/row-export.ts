import type { Context } from 'koa';
import type { Pool } from '@gantry/db';
import { EXPORT_MAX_ROWS, sendExport, type ExportColumn, type ExportFormat } from '../../http/export.ts';
import { assetRefColumns, selectList } from './sql.ts';
import { metricExportArrays, type MetricRow, type utilizationExportFigures } from './utilization.service.ts';

export interface MetricExport {
  format: ExportFormat;
  filename: string;
  sheetName: string;
  /** The rows of this page, in order (at most EXPORT_MAX_ROWS are sent). */
  rows: MetricRow[];
  /** Which figures become columns, and under which names. */
  figures: typeof utilizationExportFigures;
  /** Offset of the first row within the whole result. */
  offset: number;
  /** Whether rows remain after this page. */
  truncated: boolean;
}

/**
 * Sends one page of utilization or container work. Those rows come from the gold read
 * module, which answers rows rather than a statement, so the page goes through the
 * shared export module as `unnest` of one array per column — CSV still leaves through
 * COPY and XLSX through the streaming writer — with bucket bounds as epoch seconds and
 * the asset fields joined in SQL to keep the arrays small. The paging headers are then
 * set for the page's real position in the whole result.
 */
export async function sendMetricExport(ctx: Context, pool: Pool, page: MetricExport): Promise<void> {
  const arrays = metricExportArrays(page.rows.slice(0, EXPORT_MAX_ROWS), page.figures);
  // One comma-separated text per column: cheap to inline into COPY (no per-element quoting).
  const values: string[] = [
    arrays.bucketStart,
    arrays.bucketEnd,
    arrays.assetId.map((id) => id ?? ''),
    ...arrays.figures.map((figure) => figure.values),
  ].map((column) => column.join(','));
  const array = (index: number, type: string) => `string_to_array($${index}::text, ',', '')::${type}[]`;
  const unnest = [
    array(1, 'float8'),
    array(2, 'float8'),
    array(3, 'uuid'),
    ...arrays.figures.map((_, index) => array(index + 4, 'float8')),
  ].join(', ');
  const aliases = [
    'bucket_start',
    'bucket_end',
    'asset_id',
    ...arrays.figures.map((_, index) => `f${index}`),
    'position',
  ].join(', ');
  const columns: ExportColumn[] = [
    { name: 'bucketStart', type: 'timestamp' },
    { name: 'bucketEnd', type: 'timestamp' },
    { name: 'groupType' },
    ...assetRefColumns.map((column) => ({ name: column.name })),
    ...arrays.figures.map((figure) => ({ name: figure.name, type: 'number' as const })),
  ];
  await sendExport(ctx, pool, {
    format: page.format,
    filename: page.filename,
    sheetName: page.sheetName,
    columns,
    query: {
      text: `/* api:exportTelemetryMetric */
SELECT to_timestamp(p.bucket_start) AS "bucketStart", to_timestamp(p.bucket_end) AS "bucketEnd",
       CASE WHEN p.asset_id IS NULL THEN 'fleet' ELSE 'asset' END AS "groupType",
       ${selectList(assetRefColumns)},
       ${arrays.figures.map((figure, index) => `p.f${index} AS "${figure.name}"`).join(', ')}
  FROM unnest(${unnest}) WITH ORDINALITY AS p(${aliases})
  LEFT JOIN assets a ON a.id = p.asset_id
  LEFT JOIN asset_types t ON t.id = a.asset_type_id
 ORDER BY p.position`,
      values,
    },
    offset: 0,
  });
  const base = page.filename.replace(/[^A-Za-z0-9._-]+/g, '_');
  ctx.set(
    'Content-Disposition',
    `attachment; filename="${base}${page.offset > 0 ? `-offset-${page.offset}` : ''}.${page.format}"`,
  );
  ctx.set('X-Export-Offset', String(page.offset));
  ctx.set('X-Export-Truncated', page.truncated ? 'true' : 'false');
  if (page.truncated) ctx.set('X-Next-Offset', String(page.offset + EXPORT_MAX_ROWS));
  else ctx.remove('X-Next-Offset');
}
