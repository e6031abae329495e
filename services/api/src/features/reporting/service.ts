import type { Queryable } from '@gantry/db';
import { NotFoundError } from '../../errors.ts';
import type { ApiKeyAuth } from '../../http/auth.ts';
import { resolveOptionalRange } from '../../http/query.ts';
import { findRecentServiceRequests } from '../service-requests/repository.ts';
import * as repository from './repository.ts';
import type { RecordFilters, ReportingScope } from './repository.ts';
import { splitRange, type Window } from './periods.ts';
import {
  breakdownKeys,
  summaryCounters,
  type BreakdownKey,
  type RecordListQuery,
  type ReportingMonthlyMetric,
  type ReportingOverviewResponse,
  type ReportingSummary,
} from './schemas.ts';

/**
 * What a key may see, given the `customerName` it asked for. A tenant key narrows to the
 * name asked for; a customer key always keeps its own name, and asking for another name
 * gives an empty answer (`empty`), never the other customer's rows.
 */
export interface ResolvedScope {
  scope: ReportingScope;
  empty: boolean;
  echo: { customerName: string | null; customerScoped: boolean };
}

export function resolveScope(auth: ApiKeyAuth, requested: string | undefined): ResolvedScope {
  if (auth.customerName !== null) {
    return {
      scope: { tenantId: auth.tenantId, customerName: auth.customerName },
      empty: requested !== undefined && requested !== auth.customerName,
      echo: { customerName: auth.customerName, customerScoped: true },
    };
  }
  const customerName = requested ?? null;
  return {
    scope: { tenantId: auth.tenantId, customerName },
    empty: false,
    echo: { customerName, customerScoped: false },
  };
}

/** The key's own scope, for reads by id (404 outside it). */
export function keyScope(auth: ApiKeyAuth): ReportingScope {
  return { tenantId: auth.tenantId, customerName: auth.customerName };
}

export async function getAsset(db: Queryable, auth: ApiKeyAuth, id: string) {
  const asset = await repository.findAsset(db, keyScope(auth), id);
  if (!asset) throw new NotFoundError(`asset ${id} not found`);
  return asset;
}

export async function getInspection(db: Queryable, auth: ApiKeyAuth, id: string) {
  const inspection = await repository.findInspection(db, keyScope(auth), id);
  if (!inspection) throw new NotFoundError(`inspection ${id} not found`);
  return inspection;
}

export async function getReport(db: Queryable, auth: ApiKeyAuth, id: string) {
  const report = await repository.findReport(db, keyScope(auth), id);
  if (!report) throw new NotFoundError(`report ${id} not found`);
  return report;
}

/** Filters of the inspection and report lists and of the export; an absent bound is open. */
export function recordFilters(query: Omit<RecordListQuery, 'limit' | 'offset'>): {
  filters: RecordFilters;
  range: { from: string | null; to: string | null };
} {
  const range = resolveOptionalRange(query);
  return {
    filters: {
      from: range.from,
      to: range.to,
      status: query.status,
      assetId: query.assetId,
      outcome: query.outcome,
      impact: query.impact,
      q: query.q,
      assetType: query.assetType,
    },
    range: range.echo,
  };
}

// Overview ------------------------------------------------------------------------------

const RECENT_ITEMS = 10;
/** Beyond this many months, months before the first / after the last activity are left out. */
const MONTHLY_FILL_LIMIT = 120;
const OPEN_STATUSES = new Set(['new', 'reopened', 'triaged', 'in_progress', 'waiting_customer']);

function monthIndex(month: string): number {
  return Number(month.slice(0, 4)) * 12 + Number(month.slice(5, 7)) - 1;
}

function monthLabel(index: number): string {
  return `${String(Math.floor(index / 12)).padStart(4, '0')}-${String((index % 12) + 1).padStart(2, '0')}`;
}

function monthOf(date: Date): string {
  return date.toISOString().slice(0, 7);
}

/** The months the monthly series lists (see docs/reporting.md, "monthly"). */
export function monthsToList(
  range: { from: Date | null; to: Date | null },
  activity: { first: string | null; last: string | null },
): string[] {
  let first =
    range.from !== null ? monthIndex(monthOf(range.from)) : activity.first === null ? null : monthIndex(activity.first);
  let last =
    range.to !== null
      ? monthIndex(monthOf(new Date(range.to.getTime() - 1)))
      : activity.last === null
        ? null
        : monthIndex(activity.last);
  if (first === null || last === null) return [];
  if (last - first + 1 > MONTHLY_FILL_LIMIT) {
    if (activity.first === null || activity.last === null) return [];
    first = Math.max(first, monthIndex(activity.first));
    last = Math.min(last, monthIndex(activity.last));
  }
  const months: string[] = [];
  for (let index = first; index <= last; index += 1) months.push(monthLabel(index));
  return months;
}

type Tally = Map<string, number>;

function bump(tally: Tally, label: string, count: number): void {
  tally.set(label, (tally.get(label) ?? 0) + count);
}

/** Largest count first, then label; zero counts left out. */
function toBreakdown(tally: Tally): Array<{ label: string; count: number }> {
  return [...tally.entries()]
    .filter(([, count]) => count !== 0)
    .map(([label, count]) => ({ label, count }))
    .sort((a, b) => b.count - a.count || (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
}

function emptySummary(): ReportingSummary {
  const summary = Object.fromEntries(summaryCounters.map((key) => [key, 0])) as Record<
    (typeof summaryCounters)[number],
    number
  >;
  return { ...summary, serviceCancellationRate: 0 };
}

export async function buildOverview(
  db: Queryable,
  auth: ApiKeyAuth,
  query: { from?: string | undefined; to?: string | undefined; customerName?: string | undefined },
): Promise<ReportingOverviewResponse> {
  const range = resolveOptionalRange(query);
  const resolved = resolveScope(auth, query.customerName);
  const window: Window = { from: range.from, to: range.to };
  const base = {
    apiKey: { name: auth.keyName, customerName: auth.customerName, customerScoped: auth.customerScoped },
    scope: resolved.echo,
    range: range.echo,
  };
  const tallies = Object.fromEntries(breakdownKeys.map((key) => [key, new Map()])) as Record<BreakdownKey, Tally>;
  const summary = emptySummary();

  if (resolved.empty) {
    const months = range.from !== null && range.to !== null ? monthsToList(window, { first: null, last: null }) : [];
    return {
      ...base,
      monthly: months.map((month) => ({ month, inspections: 0, reports: 0, outOfService: 0, rejected: 0 })),
      recentReports: [],
      recentServiceRequests: [],
      breakdowns: Object.fromEntries(
        breakdownKeys.map((key) => [key, []]),
      ) as unknown as ReportingOverviewResponse['breakdowns'],
      summary,
    };
  }

  const scope = resolved.scope;
  const [facts, recentRequests] = await Promise.all([
    repository.overviewFacts(
      db,
      scope,
      { split: splitRange(range.from, range.to), window },
      {
        recentReports: RECENT_ITEMS,
        activity: range.from === null || range.to === null,
      },
    ),
    findRecentServiceRequests(db, scope, window, RECENT_ITEMS),
  ]);
  const { inspections, reports, assets, serviceRequests: requests, recentReports: recent, activity } = facts;

  const monthly = new Map<string, ReportingMonthlyMetric>();
  const monthRow = (month: string) => {
    let row = monthly.get(month);
    if (!row) {
      row = { month, inspections: 0, reports: 0, outOfService: 0, rejected: 0 };
      monthly.set(month, row);
    }
    return row;
  };
  for (const month of monthsToList(window, activity)) monthRow(month);

  for (const fact of inspections) {
    summary.inspections += fact.count;
    if (fact.status === 'completed') summary.completedInspections += fact.count;
    if (fact.rejected) summary.rejectedInspections += fact.count;
    bump(tallies.inspectionStatus, fact.status, fact.count);
    bump(tallies.template, fact.templateName, fact.count);
    monthRow(fact.month).inspections += fact.count;
  }
  for (const fact of reports) {
    summary.reports += fact.count;
    if (fact.impact === 'out_of_service') summary.outOfServiceReports += fact.count;
    if (fact.impact === 'warning') summary.warningReports += fact.count;
    if (fact.outcome === 'rejected') summary.rejectedReports += fact.count;
    bump(tallies.reportOutcome, fact.outcome, fact.count);
    const row = monthRow(fact.month);
    row.reports += fact.count;
    if (fact.impact === 'out_of_service') row.outOfService += fact.count;
    if (fact.outcome === 'rejected') row.rejected += fact.count;
  }
  for (const facet of assets) {
    if (facet.facet === 'lifecycle') {
      summary.assets += facet.count;
      if (facet.label === 'active') summary.activeAssets += facet.count;
      else summary.inactiveAssets += facet.count;
    } else {
      bump(tallies[facet.facet], facet.label, facet.count);
    }
  }
  for (const fact of requests) {
    summary.serviceRequests += fact.count;
    if (OPEN_STATUSES.has(fact.status)) summary.openServiceRequests += fact.count;
    if (fact.status === 'resolved') summary.resolvedServiceRequests += fact.count;
    if (fact.status === 'closed') summary.closedServiceRequests += fact.count;
    if (fact.status === 'cancelled') summary.cancelledServiceRequests += fact.count;
    if (fact.priority === 'urgent') summary.urgentServiceRequests += fact.count;
    bump(tallies.serviceRequestStatus, fact.status, fact.count);
    bump(tallies.serviceRequestCategory, fact.category, fact.count);
    bump(tallies.serviceRequestPriority, fact.priority, fact.count);
    if (fact.cancelReason !== null) bump(tallies.serviceRequestCancellationReason, fact.cancelReason, fact.count);
  }
  summary.serviceCancellationRate =
    summary.serviceRequests === 0
      ? 0
      : Math.round((summary.cancelledServiceRequests / summary.serviceRequests) * 10_000) / 100;

  return {
    ...base,
    monthly: [...monthly.values()].sort((a, b) => (a.month < b.month ? -1 : 1)),
    recentReports: recent,
    recentServiceRequests: recentRequests,
    breakdowns: Object.fromEntries(
      breakdownKeys.map((key) => [key, toBreakdown(tallies[key])]),
    ) as unknown as ReportingOverviewResponse['breakdowns'],
    summary,
  };
}
