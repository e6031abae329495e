import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { ErrorResponse } from '../../http/common-schemas.ts';
import { exportResponses, sendExport, type ExportColumn, type ExportFormat } from '../../http/export.ts';
import { defineRoute, type ResponseSpec, type RouteSpec } from '../../http/route.ts';
import * as repository from './repository.ts';
import {
  AssetListQuery,
  AssetTypeListQuery,
  ExportQuery,
  IdParams,
  OverviewQuery,
  RecordListQuery,
  ReportingAsset,
  ReportingAssetListResponse,
  ReportingAssetTypeListResponse,
  ReportingInspection,
  ReportingInspectionListResponse,
  ReportingOverviewResponse,
  ReportingReport,
  ReportingReportListResponse,
  ReportingTemplateListResponse,
} from './schemas.ts';
import { buildOverview, getAsset, getInspection, getReport, recordFilters, resolveScope } from './service.ts';

const tags = ['Reporting'];

const errors: Record<number, ResponseSpec> = {
  400: { description: 'Invalid query parameter, range or filter', schema: ErrorResponse },
  401: { description: 'Missing, disabled or invalid key', schema: ErrorResponse },
  429: { description: 'Rate limit exceeded', schema: ErrorResponse },
};
const notFound: Record<number, ResponseSpec> = {
  404: { description: 'Not found in the tenant / customer scope of the key', schema: ErrorResponse },
};

const SUCCESSOR = '/api/external/v1/reporting/assets';

/** The spec's Reporting part; decisions in docs/reporting.md. */
export function reportingRoutes(deps: AppDeps): RouteSpec[] {
  const db = deps.pool;

  const assetList = (deprecated: boolean) =>
    defineRoute({
      method: 'get',
      base: 'external',
      path: deprecated ? '/assets' : '/reporting/assets',
      operationId: deprecated ? 'listAssetsDeprecated' : 'listReportingAssets',
      summary: deprecated
        ? 'Assets (deprecated alias of /reporting/assets)'
        : 'Assets with their inspection and report figures',
      description:
        'q searches name, identifier, display code, external reference and telemetry device id. Sorted by name.' +
        (deprecated ? ' Deprecated: use /reporting/assets (Deprecation and Link headers say so).' : ''),
      tags,
      auth: 'apiKey',
      deprecated,
      ...(deprecated ? { successor: '/reporting/assets' } : {}),
      request: { query: AssetListQuery },
      responses: {
        200: {
          description: 'A page of assets',
          schema: ReportingAssetListResponse,
          ...(deprecated
            ? {
                headers: {
                  Deprecation: {
                    description: 'RFC 9745: deprecated since the date given as @epoch-seconds',
                    schema: { type: 'string' },
                  },
                  Link: { description: `<${SUCCESSOR}>; rel="successor-version"`, schema: { type: 'string' } },
                },
              }
            : {}),
        },
        ...errors,
      },
      handler: async (ctx, { query, auth }) => {
        const key = requireApiKey(auth);
        const resolved = resolveScope(key, query.customerName);
        const items = resolved.empty
          ? []
          : await repository.listAssets(db, resolved.scope, {
              q: query.q,
              status: query.status,
              assetType: query.assetType,
              limit: query.limit,
              offset: query.offset,
            });
        ctx.body = { items, paging: { limit: query.limit, offset: query.offset }, scope: resolved.echo };
      },
    });

  const exportRoute = (format: ExportFormat) =>
    defineRoute({
      method: 'get',
      base: 'external',
      path: `/reporting/export.${format}`,
      operationId: format === 'csv' ? 'exportReportingCsv' : 'exportReportingXlsx',
      summary: `Inspections and their reports as ${format.toUpperCase()}, 50,000 rows per response`,
      description:
        'One row per inspection in range (by occurredAt) and each of its reports; an inspection without report is one row with ' +
        'empty report columns. Oldest first. Filters as for /reporting/inspections. Follow X-Next-Offset while X-Export-Truncated is true.',
      tags,
      auth: 'apiKey',
      rateLimit: 'export',
      request: { query: ExportQuery },
      responses: exportResponses(format),
      handler: async (ctx, { query, auth }) => {
        const key = requireApiKey(auth);
        const resolved = resolveScope(key, query.customerName);
        const { filters, range } = recordFilters(query);
        const statement = repository.exportStatement(resolved.scope, filters, resolved.empty);
        const datePart = [range.from, range.to].map((value) => value?.slice(0, 10) ?? 'all').join('_');
        await sendExport(ctx, db, {
          format,
          filename: `reporting-${datePart}`,
          sheetName: 'Inspections',
          columns: repository.exportColumns as unknown as ExportColumn[],
          query: statement,
          offset: query.offset,
        });
      },
    });

  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/overview',
      operationId: 'getReportingOverview',
      summary: 'Counters, breakdowns, monthly series and recent items within a range',
      description: 'Without from/to the whole history counts. Every counter is defined in the reporting guide.',
      tags,
      auth: 'apiKey',
      request: { query: OverviewQuery },
      responses: { 200: { description: 'The overview', schema: ReportingOverviewResponse }, ...errors },
      handler: async (ctx, { query, auth }) => {
        ctx.body = await buildOverview(db, requireApiKey(auth), query);
      },
    }),
    assetList(false),
    assetList(true),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/assets/:id',
      operationId: 'getReportingAsset',
      summary: 'One asset',
      tags,
      auth: 'apiKey',
      request: { params: IdParams },
      responses: { 200: { description: 'The asset', schema: ReportingAsset }, ...errors, ...notFound },
      handler: async (ctx, { params, auth }) => {
        ctx.body = await getAsset(db, requireApiKey(auth), params.id);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/asset-types',
      operationId: 'listReportingAssetTypes',
      summary: 'Asset types with the number of assets the key may see',
      description:
        'Customer-scoped keys (and a tenant key narrowed by customerName) see only types of their visible assets. q searches name and description.',
      tags,
      auth: 'apiKey',
      request: { query: AssetTypeListQuery },
      responses: { 200: { description: 'Asset types by name', schema: ReportingAssetTypeListResponse }, ...errors },
      handler: async (ctx, { query, auth }) => {
        const resolved = resolveScope(requireApiKey(auth), query.customerName);
        ctx.body = { items: resolved.empty ? [] : await repository.listAssetTypes(db, resolved.scope, query.q) };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/templates',
      operationId: 'listReportingTemplates',
      summary: 'Inspection templates of the tenant',
      tags,
      auth: 'apiKey',
      responses: { 200: { description: 'Templates by name', schema: ReportingTemplateListResponse }, ...errors },
      handler: async (ctx, { auth }) => {
        ctx.body = { items: await repository.listTemplates(db, requireApiKey(auth).tenantId) };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/inspections',
      operationId: 'listReportingInspections',
      summary: 'Inspections with asset, template, latest report and media counters',
      description:
        'Range over occurredAt (completedAt, else startedAt, else createdAt); without from/to every inspection. outcome and impact ' +
        "filter on the inspection's latest report. q searches the asset's name, identifier, display code, external reference and " +
        "device ids, and the inspection's operator identifier and external reference. Newest first.",
      tags,
      auth: 'apiKey',
      request: { query: RecordListQuery },
      responses: { 200: { description: 'A page of inspections', schema: ReportingInspectionListResponse }, ...errors },
      handler: async (ctx, { query, auth }) => {
        const resolved = resolveScope(requireApiKey(auth), query.customerName);
        const { filters, range } = recordFilters(query);
        const paging = { limit: query.limit, offset: query.offset };
        const items = resolved.empty ? [] : await repository.listInspections(db, resolved.scope, filters, paging);
        ctx.body = { items, paging, range, scope: resolved.echo };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/inspections/:id',
      operationId: 'getReportingInspection',
      summary: 'One inspection with its asset, template, latest report and media counters',
      tags,
      auth: 'apiKey',
      request: { params: IdParams },
      responses: { 200: { description: 'The inspection', schema: ReportingInspection }, ...errors, ...notFound },
      handler: async (ctx, { params, auth }) => {
        ctx.body = await getInspection(db, requireApiKey(auth), params.id);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/reports',
      operationId: 'listReportingReports',
      summary: 'Inspection reports',
      description:
        "Range over createdAt; without from/to every report. q searches the asset's fields and device ids, the report's external " +
        "reference and its inspection's operator identifier and external reference. Newest first.",
      tags,
      auth: 'apiKey',
      request: { query: RecordListQuery },
      responses: { 200: { description: 'A page of reports', schema: ReportingReportListResponse }, ...errors },
      handler: async (ctx, { query, auth }) => {
        const resolved = resolveScope(requireApiKey(auth), query.customerName);
        const { filters, range } = recordFilters(query);
        const paging = { limit: query.limit, offset: query.offset };
        const items = resolved.empty ? [] : await repository.listReports(db, resolved.scope, filters, paging);
        ctx.body = { items, paging, range, scope: resolved.echo };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/reporting/reports/:id',
      operationId: 'getReportingReport',
      summary: 'One report',
      tags,
      auth: 'apiKey',
      request: { params: IdParams },
      responses: { 200: { description: 'The report', schema: ReportingReport }, ...errors, ...notFound },
      handler: async (ctx, { params, auth }) => {
        ctx.body = await getReport(db, requireApiKey(auth), params.id);
      },
    }),
    exportRoute('csv'),
    exportRoute('xlsx'),
  ];
}
