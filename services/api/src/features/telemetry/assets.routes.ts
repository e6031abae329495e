import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { resolveRange } from '../../http/query.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { visibleAsset } from './assets.repository.ts';
import { readCapabilities } from './capabilities.service.ts';
import { notFound, readErrors, TELEMETRY_TAG } from './common.ts';
import { readDataQuality } from './data-quality.service.ts';
import {
  assetIdFilter,
  dataQualityStatusParam,
  optionalPaging,
  paging,
  range,
  rangeRules,
  resolutionParam,
  searchParam,
} from './params.ts';
import { autoResolution, listPositions } from './positions.repository.ts';
import {
  TelemetryAssetStateResponse,
  TelemetryCapabilitiesResponse,
  TelemetryDataQualityResponse,
  TelemetryPositionHistoryResponse,
} from './schemas.ts';
import { scopeOf } from './sql.ts';
import { readAssetState } from './state.repository.ts';

const assetParams = z.object({ assetId: z.uuid('must be a UUID') });

export const positionQuery = z.object({ ...range, resolution: resolutionParam });

export function assetRoutes(deps: AppDeps): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/capabilities',
      operationId: 'getTelemetryCapabilities',
      summary: 'Which telemetry the key’s assets report',
      description:
        'A capability is enabled once any device of an asset in scope has reported that kind of reading; messageTypesLast7d counts valid readings per type over the last 7 days.',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      responses: {
        200: { description: 'Capabilities of the assets in scope', schema: TelemetryCapabilitiesResponse },
        ...readErrors,
      },
      handler: async (ctx, { auth }) => {
        ctx.body = await readCapabilities(deps.pool, scopeOf(requireApiKey(auth)));
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/assets/:assetId/state',
      operationId: 'getTelemetryAssetState',
      summary: 'Latest known state of an asset',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { params: assetParams },
      responses: {
        200: { description: 'The asset and its latest state', schema: TelemetryAssetStateResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { params, auth }) => {
        const scope = scopeOf(requireApiKey(auth));
        const asset = await visibleAsset(deps.pool, scope, params.assetId);
        ctx.body = {
          asset,
          state: await readAssetState(deps.pool, scope.tenantId, asset.id, deps.config.telemetryStatus),
        };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/assets/:assetId/positions',
      operationId: 'listTelemetryAssetPositions',
      summary: 'Position history of an asset, from the 1-minute or 15-minute gold buckets',
      description:
        'Buckets whose start lies in [from, to), oldest first; always from gold (source gold). Default range: the last 24 hours; at most 31 days. resolution defaults to 1min for ranges up to 24 hours and 15min beyond.',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { params: assetParams, query: positionQuery.extend(paging) },
      responses: {
        200: { description: 'One page of position buckets', schema: TelemetryPositionHistoryResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { params, query, auth }) => {
        const scope = scopeOf(requireApiKey(auth));
        const resolved = resolveRange(query, rangeRules.positions);
        const asset = await visibleAsset(deps.pool, scope, params.assetId);
        const resolution = query.resolution ?? autoResolution(resolved.from, resolved.to);
        const items = await listPositions(
          deps.pool,
          scope,
          { assetId: asset.id, from: resolved.from, to: resolved.to, resolution },
          query.limit,
          query.offset,
        );
        ctx.body = {
          asset,
          items,
          paging: { limit: query.limit, offset: query.offset },
          range: resolved.echo,
          resolution,
          source: 'gold',
        };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/data-quality',
      operationId: 'getTelemetryDataQuality',
      summary: 'Data quality of the devices in scope: statuses, message types, recent errors and a summary',
      description:
        'One entry per device (with its asset). Status, first that applies: disabled, offline, silent, errors (> 5 % rejected), poor_gps (< 80 % valid of ≥ 10 fixes), delayed (median receive delay > 5 min), ok. Default range: the last 24 hours; at most 31 days.\n\n' +
        '`status` and `q` narrow the entries listed in `assets`; `limit`/`offset` page them (then `paging` gives the number matching). `summary` and `messageTypes` always cover every device in scope.',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: {
        query: z.object({
          ...range,
          assetId: assetIdFilter,
          status: dataQualityStatusParam,
          q: searchParam.meta({
            description: 'Case-insensitive part of the asset name, asset identifier or device id',
          }),
          ...optionalPaging,
        }),
      },
      responses: {
        200: { description: 'The data-quality report', schema: TelemetryDataQualityResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const scope = scopeOf(requireApiKey(auth));
        const resolved = resolveRange(query, rangeRules.dataQuality);
        if (query.assetId) await visibleAsset(deps.pool, scope, query.assetId);
        const page =
          query.limit === undefined && query.offset === undefined
            ? undefined
            : { limit: query.limit ?? 100, offset: query.offset ?? 0 };
        ctx.body = await readDataQuality(deps.pool, scope, resolved, query.assetId, deps.config.telemetryStatus, {
          statuses: query.status,
          q: query.q,
          page,
        });
      },
    }),
  ];
}
