import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { exportQueryParams, exportResponses, sendExport, type ExportFormat } from '../../http/export.ts';
import { resolveRange } from '../../http/query.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { assertAssetFilterVisible } from './assets.repository.ts';
import { positionQuery } from './assets.routes.ts';
import { metricQuery, metricRange, wholeBuckets } from './buckets.ts';
import { notFound, TELEMETRY_TAG } from './common.ts';
import { deviceFilterQuery } from './devices.routes.ts';
import { deviceListStatement } from './devices.repository.ts';
import { geofenceAlertFilterQuery } from './geofences.routes.ts';
import { geofenceAlertStatement } from './geofences.repository.ts';
import { operatorStatement } from './operators.repository.ts';
import { rangeRules } from './params.ts';
import { autoResolution, positionStatement } from './positions.repository.ts';
import { serviceRequestMetricStatement } from './service-request-metrics.repository.ts';
import { identifierSessionStatement, usageSessionStatement } from './sessions.repository.ts';
import { operatorFilterQuery, sessionFilterQuery } from './sessions.routes.ts';
import { exportColumns, orderedSql, scopeOf, type ListStatement, type TelemetryScope } from './sql.ts';
import type { StatusRules } from './status.ts';

/** One exportable telemetry list: its filters and how they become one ordered statement. */
interface TelemetryExport<Q extends z.ZodObject> {
  /** The path segment: /telemetry/{name}/export.csv. */
  name: string;
  operationName: string;
  summary: string;
  query: Q;
  /** May be async (asset checks) and may throw 400/404 before any byte is sent. */
  statement: (scope: TelemetryScope, query: z.output<Q>) => ListStatement | Promise<ListStatement>;
}

function defineExport<Q extends z.ZodObject>(definition: TelemetryExport<Q>): TelemetryExport<z.ZodObject> {
  return definition as unknown as TelemetryExport<z.ZodObject>;
}

function sessionsRange(query: { from?: string | undefined; to?: string | undefined }) {
  return resolveRange(query, rangeRules.sessions);
}

/** The list exports that need nothing beyond their repository statement. */
export function listExports(rules: StatusRules): TelemetryExport<z.ZodObject>[] {
  return [
    defineExport({
      name: 'devices',
      operationName: 'TelemetryDevices',
      summary: 'Telemetry devices',
      query: deviceFilterQuery,
      statement: (scope, query) => deviceListStatement(scope, query, rules),
    }),
    defineExport({
      name: 'usage-sessions',
      operationName: 'TelemetryUsageSessions',
      summary: 'Usage sessions overlapping the range',
      query: sessionFilterQuery,
      statement: (scope, { from, to, ...filter }) => {
        const range = sessionsRange({ from, to });
        return usageSessionStatement(scope, { ...filter, from: range.from, to: range.to });
      },
    }),
    defineExport({
      name: 'identifier-sessions',
      operationName: 'TelemetryIdentifierSessions',
      summary: 'Identifier sessions overlapping the range',
      query: sessionFilterQuery,
      statement: (scope, { from, to, ...filter }) => {
        const range = sessionsRange({ from, to });
        return identifierSessionStatement(scope, { ...filter, from: range.from, to: range.to });
      },
    }),
    defineExport({
      name: 'operators',
      operationName: 'TelemetryOperators',
      summary: 'Operators with their session totals',
      query: operatorFilterQuery,
      statement: (scope, { from, to, ...filter }) => {
        const range = sessionsRange({ from, to });
        return operatorStatement(scope, { ...filter, from: range.from, to: range.to });
      },
    }),
    defineExport({
      name: 'service-request-metrics',
      operationName: 'TelemetryServiceRequestMetrics',
      summary: 'Service request counts per bucket',
      query: metricQuery,
      statement: (scope, query) => {
        const buckets = wholeBuckets(metricRange(query), query.bucket);
        return serviceRequestMetricStatement(scope, {
          ...buckets,
          bucket: query.bucket,
          groupBy: query.groupBy,
          assetId: query.assetId,
          q: query.q,
        });
      },
    }),
    defineExport({
      name: 'positions',
      operationName: 'TelemetryPositions',
      summary: 'Position history of one asset',
      query: positionQuery.extend({
        assetId: z.uuid('must be a UUID').meta({ description: 'The asset (UUID, required)' }),
      }),
      statement: (scope, { assetId, resolution, ...query }) => {
        const range = resolveRange(query, rangeRules.positions);
        return positionStatement(scope, {
          assetId,
          from: range.from,
          to: range.to,
          resolution: resolution ?? autoResolution(range.from, range.to),
        });
      },
    }),
    defineExport({
      name: 'geofence-alerts',
      operationName: 'TelemetryGeofenceAlerts',
      summary: 'Geofence alerts active in the range',
      query: geofenceAlertFilterQuery,
      statement: (scope, { from, to, ...filter }) => {
        const range = sessionsRange({ from, to });
        return geofenceAlertStatement(scope, { ...filter, from: range.from, to: range.to });
      },
    }),
  ];
}

/** CSV and XLSX routes of each export, paged by `offset` through the shared export module. */
export function exportRoutes(deps: AppDeps, exports: TelemetryExport<z.ZodObject>[]): RouteSpec[] {
  return exports.flatMap((definition) =>
    (['csv', 'xlsx'] as ExportFormat[]).map((format) =>
      defineRoute({
        method: 'get',
        base: 'external',
        path: `/telemetry/${definition.name}/export.${format}`,
        operationId: `export${definition.operationName}${format === 'csv' ? 'Csv' : 'Xlsx'}`,
        summary: `${definition.summary} as ${format.toUpperCase()} (at most 50,000 rows per response; follow X-Next-Offset)`,
        tags: [TELEMETRY_TAG],
        auth: 'apiKey',
        rateLimit: 'export',
        request: { query: definition.query.extend(exportQueryParams) },
        responses: { ...exportResponses(format), 404: notFound },
        handler: async (ctx, { query, auth }) => {
          const { offset, ...filters } = query as { offset: number } & Record<string, unknown>;
          const scope = scopeOf(requireApiKey(auth));
          const statement = await definition.statement(scope, filters);
          await assertAssetFilterVisible(deps.pool, scope, filters.assetId as string | undefined);
          await sendExport(ctx, deps.pool, {
            format,
            filename: `telemetry-${definition.name}`,
            sheetName: definition.summary,
            columns: exportColumns(statement.columns),
            query: orderedSql(statement),
            offset,
          });
        },
      }),
    ),
  );
}
