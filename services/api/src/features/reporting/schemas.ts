import { z } from 'zod';
import {
  AssetRef,
  CountBreakdownItem,
  ExternalApiKeyScope,
  Paging,
  Scope,
  TimeRange,
  nullableDateTime,
} from '../../http/common-schemas.ts';
import { exportQueryParams } from '../../http/export.ts';
import { limitParam, offsetParam, timeParam, uuidParam } from '../../http/query.ts';
import { ServiceRequest } from '../service-requests/schemas.ts';

// Query parameters ----------------------------------------------------------------------

// Control characters never belong in a filter; NUL would even break the database call.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the purpose
const CONTROL = /[\u0000-\u001F\u007F]/;

/** A text filter: trimmed; empty means "not given"; too long or control characters → 400. */
const textFilter = (description: string, max = 200) =>
  z
    .string()
    .max(max, `must be at most ${max} characters`)
    .refine((value) => !CONTROL.test(value), 'must not contain control characters')
    .transform((value) => value.trim() || undefined)
    .optional()
    .meta({ description });

const q = textFilter(
  'Case-insensitive search; see each endpoint for the fields searched (3+ characters use the trigram indexes)',
);
const status = textFilter('Exact status', 100);
const customerName = textFilter('Exact customer name; narrows a tenant key, cannot widen a customer key');
const assetType = textFilter('Exact asset type name');
const outcome = textFilter('Exact outcome of the latest report (for example completed or rejected)', 100);
const impact = textFilter('Exact impact of the latest report (for example none, warning or out_of_service)', 100);
const assetId = uuidParam('Asset id').optional();

export const AssetListQuery = z.object({ q, status, customerName, assetType, limit: limitParam, offset: offsetParam });
export type AssetListQuery = z.infer<typeof AssetListQuery>;

export const AssetTypeListQuery = z.object({ q, customerName });
export type AssetTypeListQuery = z.infer<typeof AssetTypeListQuery>;

const recordFilters = {
  from: timeParam.optional(),
  to: timeParam.optional(),
  status,
  assetId,
  customerName,
  outcome,
  impact,
  q,
  assetType,
};

export const RecordListQuery = z.object({ ...recordFilters, limit: limitParam, offset: offsetParam });
export type RecordListQuery = z.infer<typeof RecordListQuery>;

export const ExportQuery = z.object({ ...recordFilters, ...exportQueryParams });
export type ExportQuery = z.infer<typeof ExportQuery>;

export const OverviewQuery = z.object({ from: timeParam.optional(), to: timeParam.optional(), customerName });
export type OverviewQuery = z.infer<typeof OverviewQuery>;

export const IdParams = z.object({ id: uuidParam('Id') });

// Resources -----------------------------------------------------------------------------

export const ReportingAsset = z
  .object({
    id: z.uuid(),
    name: z.string(),
    identifier: z.string(),
    displayCode: z.string(),
    assetType: z.string(),
    assetTypeId: z.uuid().nullable(),
    location: z.string(),
    customerName: z.string(),
    customerEmail: z.string(),
    customerPhone: z.string(),
    lifecycleStatus: z.string(),
    operationalStatus: z.string(),
    status: z.string().meta({ description: 'Operational status' }),
    externalRef: z.string(),
    latestImpact: z.string(),
    latestOutcome: z.string(),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
    latestInspectionAt: nullableDateTime,
    latestReportAt: nullableDateTime,
    inspectionCount: z.number().int(),
    reportCount: z.number().int(),
  })
  .meta({ id: 'ReportingAsset' });
export type ReportingAsset = z.infer<typeof ReportingAsset>;

export const ReportingAssetListResponse = z
  .object({ items: z.array(ReportingAsset), paging: Paging, scope: Scope })
  .meta({ id: 'ReportingAssetListResponse' });

export const ReportingAssetType = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    assetCount: z.number().int().meta({ description: 'Assets of this type the key may see' }),
    fields: z.record(z.string(), z.unknown()),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'ReportingAssetType' });
export type ReportingAssetType = z.infer<typeof ReportingAssetType>;

export const ReportingAssetTypeListResponse = z
  .object({ items: z.array(ReportingAssetType) })
  .meta({ id: 'ReportingAssetTypeListResponse' });

export const ReportingTemplate = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    status: z.string(),
    latestVersion: z.number().int(),
    assetTypeIds: z.array(z.uuid()),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'ReportingTemplate' });
export type ReportingTemplate = z.infer<typeof ReportingTemplate>;

export const ReportingTemplateListResponse = z
  .object({ items: z.array(ReportingTemplate) })
  .meta({ id: 'ReportingTemplateListResponse' });

export const ReportingMedia = z
  .object({ total: z.number().int().meta({ description: 'Sum of the counters' }) })
  .catchall(z.number().int())
  .meta({
    id: 'ReportingMedia',
    description: 'Media counters by kind (photos, videos, documents, …) and their total',
    example: { total: 3, photos: 2, videos: 0, documents: 1 },
  });

export const ReportingTemplateRef = z
  .object({
    id: z.uuid().nullable(),
    name: z.string().nullable(),
    status: z.string().nullable(),
    version: z.number().int().nullable().meta({ description: 'Template version used (inspections)' }),
    latestVersion: z.number().int().nullable(),
  })
  .meta({ id: 'ReportingTemplateRef', description: 'The template used; every field null when none' });

export const ReportingReportSummary = z
  .object({
    id: z.uuid().nullable(),
    status: z.string().nullable(),
    impact: z.string().nullable(),
    outcome: z.string().nullable(),
    rejectionReason: z.string().nullable(),
    summary: z.string().nullable(),
    createdAt: nullableDateTime,
    count: z.number().int().meta({ description: 'Reports of this inspection' }),
  })
  .meta({ id: 'ReportingReportSummary', description: "The inspection's latest report; fields null when it has none" });

export const ReportingInspection = z
  .object({
    id: z.uuid(),
    asset: AssetRef,
    status: z.string(),
    startedAt: nullableDateTime,
    completedAt: nullableDateTime,
    occurredAt: nullableDateTime.meta({
      description: 'completedAt, else startedAt, else createdAt: the time ranges use',
    }),
    createdAt: nullableDateTime,
    inspectorName: z.string(),
    operatorIdentifier: z.string(),
    externalRef: z.string(),
    notes: z.string(),
    media: ReportingMedia,
    report: ReportingReportSummary,
    template: ReportingTemplateRef,
  })
  .meta({ id: 'ReportingInspection' });
export type ReportingInspection = z.infer<typeof ReportingInspection>;

export const ReportingInspectionListResponse = z
  .object({ items: z.array(ReportingInspection), paging: Paging, range: TimeRange, scope: Scope })
  .meta({ id: 'ReportingInspectionListResponse' });

export const ReportingReport = z
  .object({
    id: z.uuid(),
    inspectionId: z.uuid(),
    asset: AssetRef,
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
    status: z.string(),
    impact: z.string(),
    outcome: z.string(),
    rejectionReason: z.string(),
    summary: z.string(),
    externalRef: z.string(),
    media: ReportingMedia,
    template: ReportingTemplateRef,
  })
  .meta({ id: 'ReportingReport' });
export type ReportingReport = z.infer<typeof ReportingReport>;

export const ReportingReportListResponse = z
  .object({ items: z.array(ReportingReport), paging: Paging, range: TimeRange, scope: Scope })
  .meta({ id: 'ReportingReportListResponse' });

export const ReportingRecentReport = z
  .object({
    reportId: z.uuid(),
    inspectionId: z.uuid(),
    assetName: z.string(),
    customerName: z.string(),
    location: z.string(),
    impact: z.string(),
    outcome: z.string(),
    rejectionReason: z.string(),
    templateName: z.string(),
    createdAt: nullableDateTime,
  })
  .meta({ id: 'ReportingRecentReport' });
export type ReportingRecentReport = z.infer<typeof ReportingRecentReport>;

export const ReportingMonthlyMetric = z
  .object({
    month: z
      .string()
      .regex(/^\d{4}-\d{2}$/)
      .meta({ example: '2026-10' }),
    inspections: z.number().int(),
    reports: z.number().int(),
    outOfService: z.number().int(),
    rejected: z.number().int(),
  })
  .meta({ id: 'ReportingMonthlyMetric' });
export type ReportingMonthlyMetric = z.infer<typeof ReportingMonthlyMetric>;

export const breakdownKeys = [
  'assetType',
  'customer',
  'inspectionStatus',
  'location',
  'reportOutcome',
  'serviceRequestCancellationReason',
  'serviceRequestCategory',
  'serviceRequestPriority',
  'serviceRequestStatus',
  'template',
] as const;
export type BreakdownKey = (typeof breakdownKeys)[number];

export const ReportingBreakdowns = z
  .object(
    Object.fromEntries(breakdownKeys.map((key) => [key, z.array(CountBreakdownItem)])) as Record<
      BreakdownKey,
      z.ZodArray<typeof CountBreakdownItem>
    >,
  )
  .meta({ id: 'ReportingBreakdowns' });

export const summaryCounters = [
  'activeAssets',
  'assets',
  'cancelledServiceRequests',
  'closedServiceRequests',
  'completedInspections',
  'inactiveAssets',
  'inspections',
  'openServiceRequests',
  'outOfServiceReports',
  'rejectedInspections',
  'rejectedReports',
  'reports',
  'resolvedServiceRequests',
  'serviceRequests',
  'urgentServiceRequests',
  'warningReports',
] as const;
export type SummaryCounter = (typeof summaryCounters)[number];

export const ReportingSummary = z
  .object({
    ...(Object.fromEntries(summaryCounters.map((key) => [key, z.number().int()])) as Record<
      SummaryCounter,
      z.ZodNumber
    >),
    serviceCancellationRate: z
      .number()
      .meta({ description: 'cancelledServiceRequests / serviceRequests × 100, 0 when none' }),
  })
  .meta({ id: 'ReportingSummary' });
export type ReportingSummary = z.infer<typeof ReportingSummary>;

export const ReportingOverviewResponse = z
  .object({
    apiKey: ExternalApiKeyScope,
    scope: Scope,
    range: TimeRange,
    monthly: z.array(ReportingMonthlyMetric),
    recentReports: z.array(ReportingRecentReport),
    recentServiceRequests: z.array(ServiceRequest),
    breakdowns: ReportingBreakdowns,
    summary: ReportingSummary,
  })
  .meta({ id: 'ReportingOverviewResponse' });
export type ReportingOverviewResponse = z.infer<typeof ReportingOverviewResponse>;
