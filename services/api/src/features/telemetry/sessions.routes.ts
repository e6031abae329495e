import { assertAssetFilterVisible } from './assets.repository.ts';
import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { resolveRange } from '../../http/query.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { notFound, readErrors, TELEMETRY_TAG } from './common.ts';
import { listOperators } from './operators.repository.ts';
import { assetIdFilter, identifierParam, paging, range, rangeRules, searchParam } from './params.ts';
import {
  TelemetryIdentifierSessionListResponse,
  TelemetryOperatorListResponse,
  TelemetryUsageSessionListResponse,
} from './schemas.ts';
import { listIdentifierSessions, listUsageSessions } from './sessions.repository.ts';
import { scopeOf } from './sql.ts';

export const sessionFilterQuery = z.object({
  ...range,
  assetId: assetIdFilter,
  identifier: identifierParam,
  q: searchParam.meta({
    description:
      'Case-insensitive search over asset name, identifier, display code, device id, operator identifier and name',
  }),
});

export const operatorFilterQuery = z.object({
  ...range,
  assetId: assetIdFilter,
  identifier: identifierParam,
  q: searchParam.meta({ description: 'Case-insensitive search over operator identifier and name' }),
});

const sessionsRange =
  'Sessions overlapping [from, to) are included, even when they began before from. Default range: the last 7 days; at most 366 days.';

export function sessionRoutes(deps: AppDeps): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/usage-sessions',
      operationId: 'listTelemetryUsageSessions',
      summary: 'Usage sessions (running periods), newest first',
      description: sessionsRange,
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: sessionFilterQuery.extend(paging) },
      responses: {
        200: { description: 'One page of usage sessions', schema: TelemetryUsageSessionListResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const { limit, offset, from, to, ...filter } = query;
        const resolved = resolveRange({ from, to }, rangeRules.sessions);
        const scope = scopeOf(requireApiKey(auth));
        await assertAssetFilterVisible(deps.pool, scope, filter.assetId);
        const items = await listUsageSessions(
          deps.pool,
          scope,
          { ...filter, from: resolved.from, to: resolved.to },
          limit,
          offset,
        );
        ctx.body = { items, paging: { limit, offset }, range: resolved.echo };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/identifier-sessions',
      operationId: 'listTelemetryIdentifierSessions',
      summary: 'Identifier (RFID/operator) sessions, newest first',
      description: sessionsRange,
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: sessionFilterQuery.extend(paging) },
      responses: {
        200: { description: 'One page of identifier sessions', schema: TelemetryIdentifierSessionListResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const { limit, offset, from, to, ...filter } = query;
        const resolved = resolveRange({ from, to }, rangeRules.sessions);
        const scope = scopeOf(requireApiKey(auth));
        await assertAssetFilterVisible(deps.pool, scope, filter.assetId);
        const items = await listIdentifierSessions(
          deps.pool,
          scope,
          { ...filter, from: resolved.from, to: resolved.to },
          limit,
          offset,
        );
        ctx.body = { items, paging: { limit, offset }, range: resolved.echo };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/operators',
      operationId: 'listTelemetryOperators',
      summary: 'Operators with their identifier-session totals in the range, by identifier',
      description: `${sessionsRange} A tenant key also sees registered operators without sessions in the range.`,
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: operatorFilterQuery.extend(paging) },
      responses: {
        200: { description: 'One page of operators', schema: TelemetryOperatorListResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const { limit, offset, from, to, ...filter } = query;
        const resolved = resolveRange({ from, to }, rangeRules.sessions);
        const scope = scopeOf(requireApiKey(auth));
        await assertAssetFilterVisible(deps.pool, scope, filter.assetId);
        const items = await listOperators(
          deps.pool,
          scope,
          { ...filter, from: resolved.from, to: resolved.to },
          limit,
          offset,
        );
        ctx.body = { items, paging: { limit, offset }, range: resolved.echo };
      },
    }),
  ];
}
