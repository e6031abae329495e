import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { exportQueryParams, exportResponses, sendExport, type ExportFormat } from '../../http/export.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { assertAssetFilterVisible } from './assets.repository.ts';
import { notFound, readErrors, TELEMETRY_TAG } from './common.ts';
import { metricQuery, metricRange, wholeBuckets, type MetricParams } from './buckets.ts';
import { paging } from './params.ts';
import { metricExportStatement } from './metric-export.ts';
import {
  TelemetryContainerWorkResponse,
  TelemetryServiceRequestMetricsResponse,
  TelemetryUtilizationResponse,
} from './schemas.ts';
import { listServiceRequestMetrics } from './service-request-metrics.repository.ts';
import { scopeOf, type TelemetryScope } from './sql.ts';
import { readMetricPage, toContainerWorkItem, toUtilizationItem, type MetricQuery } from './utilization.service.ts';

async function metricInput(deps: AppDeps, scope: TelemetryScope, query: MetricParams): Promise<MetricQuery> {
  const resolved = metricRange(query);
  await assertAssetFilterVisible(deps.pool, scope, query.assetId);
  return { range: resolved, bucket: query.bucket, groupBy: query.groupBy, assetId: query.assetId, q: query.q };
}

const goldOrLive =
  'Answered from the hourly/daily gold aggregates where their coverage holds and computed live from derived segments for the rest (source tells which). Buckets overlapping [from, to) are returned whole. groupBy=fleet sums the telemetry assets the key may see and lists every bucket; groupBy=asset lists the buckets each asset has data in, ordered by bucket then asset id.';

export function metricRoutes(deps: AppDeps): RouteSpec[] {
  const gold = [
    {
      name: 'utilization',
      id: 'Utilization',
      schema: TelemetryUtilizationResponse,
      toItem: toUtilizationItem,
    },
    {
      name: 'container-work',
      id: 'ContainerWork',
      schema: TelemetryContainerWorkResponse,
      toItem: toContainerWorkItem,
    },
  ] as const;

  const goldRoutes = gold.flatMap((metric) => [
    defineRoute({
      method: 'get',
      base: 'external',
      path: `/telemetry/${metric.name}`,
      operationId: `getTelemetry${metric.id}`,
      summary: `${metric.id === 'Utilization' ? 'Utilization' : 'Container work'} per hour or day, for the fleet or per asset`,
      description: goldOrLive,
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: metricQuery.extend(paging) },
      responses: { 200: { description: 'One page of buckets', schema: metric.schema }, ...readErrors, 404: notFound },
      handler: async (ctx, { query, auth }) => {
        const scope = scopeOf(requireApiKey(auth));
        const input = await metricInput(deps, scope, query);
        const page = await readMetricPage(deps.pool, scope, input, query.limit, query.offset);
        ctx.body = {
          items: page.rows.map((row) => metric.toItem(row)),
          paging: { limit: query.limit, offset: query.offset },
          range: page.echo,
          aggregateRefresh: {
            status: page.aggregateRefresh.status,
            coverageFrom: page.aggregateRefresh.coverageFrom?.toISOString() ?? null,
            coverageTo: page.aggregateRefresh.coverageTo?.toISOString() ?? null,
            updatedAt: page.aggregateRefresh.updatedAt?.toISOString() ?? null,
          },
          bucket: query.bucket,
          groupBy: query.groupBy,
          source: page.source,
        };
      },
    }),
    ...(['csv', 'xlsx'] as ExportFormat[]).map((format) =>
      defineRoute({
        method: 'get',
        base: 'external',
        path: `/telemetry/${metric.name}/export.${format}`,
        operationId: `exportTelemetry${metric.id}${format === 'csv' ? 'Csv' : 'Xlsx'}`,
        summary: `${metric.id === 'Utilization' ? 'Utilization' : 'Container work'} buckets as ${format.toUpperCase()} (at most 50,000 rows per response; follow X-Next-Offset)`,
        description: goldOrLive,
        tags: [TELEMETRY_TAG],
        auth: 'apiKey',
        rateLimit: 'export',
        request: { query: metricQuery.extend(exportQueryParams) },
        responses: { ...exportResponses(format), 404: notFound },
        handler: async (ctx, { query, auth }) => {
          const scope = scopeOf(requireApiKey(auth));
          const input = await metricInput(deps, scope, query);
          const statement = await metricExportStatement(deps.pool, scope, metric.name, input);
          ctx.set('X-Telemetry-Source', statement.source);
          await sendExport(ctx, deps.pool, {
            format,
            filename: `telemetry-${metric.name}`,
            sheetName: metric.id === 'Utilization' ? 'Utilization' : 'Container work',
            columns: statement.columns,
            query: statement.query,
            offset: query.offset,
          });
        },
      }),
    ),
  ]);

  const serviceRequestDescription =
    'Service requests by the bucket they were created in: totalCount (all, cancelled included), and of those openCount (new, reopened, triaged, in_progress, waiting_customer), resolvedCount and closedCount by their current status, highPriorityCount and urgentPriorityCount. Always computed live from the requests (source live). A customer key counts its own requests.';

  const serviceRequestRoutes = [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/service-request-metrics',
      operationId: 'getTelemetryServiceRequestMetrics',
      summary: 'Service request counts per hour or day, for the fleet or per asset',
      description: serviceRequestDescription,
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: metricQuery.extend(paging) },
      responses: {
        200: { description: 'One page of buckets', schema: TelemetryServiceRequestMetricsResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const scope = scopeOf(requireApiKey(auth));
        const input = await metricInput(deps, scope, query);
        const buckets = wholeBuckets(input.range, query.bucket);
        const items = await listServiceRequestMetrics(
          deps.pool,
          scope,
          {
            from: buckets.from,
            to: buckets.to,
            bucket: query.bucket,
            groupBy: query.groupBy,
            assetId: query.assetId,
            q: query.q,
          },
          query.limit,
          query.offset,
        );
        ctx.body = {
          items,
          paging: { limit: query.limit, offset: query.offset },
          range: buckets.echo,
          aggregateRefresh: { status: 'not_aggregated', coverageFrom: null, coverageTo: null, updatedAt: null },
          bucket: query.bucket,
          groupBy: query.groupBy,
          source: 'live',
        };
      },
    }),
  ];
  return [...goldRoutes, ...serviceRequestRoutes];
}
