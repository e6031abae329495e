import { z } from 'zod';
import {
  AggregateRefresh,
  AssetRef,
  ContainerWorkSummary,
  dateTime,
  GeoJSONGeometry,
  nullableDateTime,
  Paging,
  Scope,
  TimeRange,
  uuid,
} from '../../http/common-schemas.ts';

// Response schemas of the spec's Telemetry part, field for field. They validate every
// response in tests and make up the OpenAPI components.

const int = () => z.number().int();

export const TelemetryCapabilitiesResponse = z
  .object({
    telemetryEnabled: z.boolean(),
    gpsEnabled: z.boolean(),
    heartbeatEnabled: z.boolean(),
    hourmeterEnabled: z.boolean(),
    identifierEnabled: z.boolean(),
    imuEnabled: z.boolean(),
    containerWorkStateEnabled: z.boolean(),
    geofenceAlertsEnabled: z.boolean(),
    telemetryAssets: int(),
    totalAssets: int(),
    messageTypesLast7d: z.record(z.string(), int()),
    scope: Scope,
  })
  .meta({ id: 'TelemetryCapabilitiesResponse' });

export const onlineStatuses = ['online', 'silent', 'offline', 'unknown', 'disabled'] as const;

export const TelemetryDevice = z
  .object({
    id: uuid,
    deviceId: z.string(),
    displayName: z.string(),
    notes: z.string(),
    assetId: uuid,
    assetName: z.string(),
    assetIdentifier: z.string(),
    assetDisplayCode: z.string(),
    enabled: z.boolean(),
    onlineStatus: z.enum(onlineStatuses),
    adcState: z.string().meta({ description: 'Raw ADC input state: on, off or unknown' }),
    workState: z.string().meta({ description: 'Derived: off, loaded, empty or unknown' }),
    containerAttached: z.boolean().nullable(),
    spreaderLocked: z.boolean().nullable(),
    hourmeterValue: int().nullable(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    lastIdentifier: z.string(),
    lastMessageType: z.string(),
    firstSeenAt: nullableDateTime,
    lastMessageAt: nullableDateTime,
    lastSeenAt: nullableDateTime,
  })
  .meta({ id: 'TelemetryDevice' });

export const TelemetryDeviceListResponse = z
  .object({
    items: z.array(TelemetryDevice),
    paging: Paging.extend({
      total: int()
        .optional()
        .meta({ description: 'With `total=true`: the devices matching the filters, over every page' }),
    }),
  })
  .meta({ id: 'TelemetryDeviceListResponse' });

export const TelemetryAssetStateResponse = z
  .object({
    asset: AssetRef,
    state: z.record(z.string(), z.unknown()).meta({ description: 'Latest known values of the asset (free-form)' }),
  })
  .meta({ id: 'TelemetryAssetStateResponse' });

export const TelemetryPosition = z
  .object({
    bucketTs: dateTime,
    lastEventTs: dateTime,
    latitude: z.number(),
    longitude: z.number(),
    pointCount: int(),
  })
  .meta({ id: 'TelemetryPosition' });

export const TelemetryPositionHistoryResponse = z
  .object({
    asset: AssetRef,
    items: z.array(TelemetryPosition),
    paging: Paging,
    range: TimeRange,
    resolution: z.enum(['15min', '1min']),
    source: z.enum(['gold']),
  })
  .meta({ id: 'TelemetryPositionHistoryResponse' });

export const TelemetryUsageSession = z
  .object({
    id: uuid,
    assetId: uuid,
    asset: AssetRef,
    deviceId: z.string(),
    identifier: z.string(),
    operatorName: z.string(),
    startReason: z.string(),
    endReason: z.string(),
    startTs: dateTime,
    endTs: dateTime,
    confidence: z.number(),
    distanceM: z.number(),
    durationSeconds: int(),
    movingSeconds: int(),
    stationaryRunningSeconds: int(),
    stopCount: int(),
    tripCount: int(),
    imuAnomalyCount: int(),
    imuSampleCount: int(),
    hourmeterDelta: int().nullable(),
    containerWork: ContainerWorkSummary,
  })
  .meta({ id: 'TelemetryUsageSession' });

export const TelemetryUsageSessionListResponse = z
  .object({ items: z.array(TelemetryUsageSession), paging: Paging, range: TimeRange })
  .meta({ id: 'TelemetryUsageSessionListResponse' });

export const TelemetryIdentifierSession = z
  .object({
    id: uuid,
    assetId: uuid,
    asset: AssetRef,
    identifier: z.string(),
    operatorName: z.string(),
    endReason: z.string(),
    startTs: dateTime,
    endTs: dateTime,
    confidence: z.number(),
    distanceM: z.number(),
    durationSeconds: int(),
    eventCount: int(),
    gpsPointCount: int(),
    stopCount: int(),
    tripCount: int(),
    containerWork: ContainerWorkSummary,
  })
  .meta({ id: 'TelemetryIdentifierSession' });

export const TelemetryIdentifierSessionListResponse = z
  .object({ items: z.array(TelemetryIdentifierSession), paging: Paging, range: TimeRange })
  .meta({ id: 'TelemetryIdentifierSessionListResponse' });

export const TelemetryOperator = z
  .object({
    identifier: z.string(),
    operatorName: z.string(),
    distanceM: z.number(),
    durationSeconds: int(),
    sessionCount: int(),
    lastSeenAt: nullableDateTime,
  })
  .meta({ id: 'TelemetryOperator' });

export const TelemetryOperatorListResponse = z
  .object({ items: z.array(TelemetryOperator), paging: Paging, range: TimeRange })
  .meta({ id: 'TelemetryOperatorListResponse' });

const metricItemBase = {
  bucketStart: dateTime,
  bucketEnd: dateTime,
  groupType: z.enum(['asset', 'fleet']),
  asset: AssetRef.nullable(),
};

const metricWrapper = {
  paging: Paging,
  range: TimeRange,
  aggregateRefresh: AggregateRefresh,
  bucket: z.enum(['hour', 'day']),
  groupBy: z.enum(['fleet', 'asset']),
  source: z.enum(['gold', 'live']),
};

export const TelemetryUtilizationItem = z
  .object({
    ...metricItemBase,
    distanceM: z.number(),
    hourmeterDelta: z.number(),
    idlePercent: z.number(),
    runningSeconds: z.number(),
    stationaryRunningSeconds: z.number(),
    utilizationPercent: z.number(),
    containerWork: ContainerWorkSummary,
  })
  .meta({ id: 'TelemetryUtilizationItem' });

export const TelemetryUtilizationResponse = z
  .object({ items: z.array(TelemetryUtilizationItem), ...metricWrapper })
  .meta({ id: 'TelemetryUtilizationResponse' });

export const TelemetryContainerWorkItem = z
  .object({
    ...metricItemBase,
    containerCycleCount: int(),
    emptyDistanceM: z.number(),
    emptySeconds: z.number(),
    loadedDistanceM: z.number(),
    loadedPercent: z.number(),
    loadedSeconds: z.number(),
  })
  .meta({ id: 'TelemetryContainerWorkItem' });

export const TelemetryContainerWorkResponse = z
  .object({ items: z.array(TelemetryContainerWorkItem), ...metricWrapper })
  .meta({ id: 'TelemetryContainerWorkResponse' });

export const TelemetryServiceRequestMetricItem = z
  .object({
    ...metricItemBase,
    closedCount: int(),
    highPriorityCount: int(),
    openCount: int(),
    resolvedCount: int(),
    totalCount: int(),
    urgentPriorityCount: int(),
  })
  .meta({ id: 'TelemetryServiceRequestMetricItem' });

export const TelemetryServiceRequestMetricsResponse = z
  .object({ items: z.array(TelemetryServiceRequestMetricItem), ...metricWrapper })
  .meta({ id: 'TelemetryServiceRequestMetricsResponse' });

export const dataQualityStatuses = ['ok', 'delayed', 'offline', 'silent', 'poor_gps', 'errors', 'disabled'] as const;
export type DataQualityStatus = (typeof dataQualityStatuses)[number];

export const TelemetryDataQualityAsset = z
  .object({
    assetId: uuid,
    name: z.string(),
    identifier: z.string(),
    displayCode: z.string(),
    assetTypeName: z.string(),
    deviceId: z.string(),
    status: z.enum(dataQualityStatuses),
    statusLabel: z.string(),
    notes: z.array(z.string()),
    enabled: z.boolean(),
    errorRate: z.number(),
    gpsOkPercent: z.number().nullable(),
    adcinEvents: int(),
    errorMessages: int(),
    gpsEvents: int(),
    heartbeatEvents: int(),
    hourmeterEvents: int(),
    imuEvents: int(),
    messageCount: int(),
    parsedMessages: int(),
    silverEvents: int(),
    validGpsEvents: int(),
    lastAdcinAt: nullableDateTime,
    lastGpsAt: nullableDateTime,
    lastHeartbeatAt: nullableDateTime,
    lastImuAt: nullableDateTime,
    lastSeenAt: nullableDateTime,
  })
  .meta({ id: 'TelemetryDataQualityAsset' });

export const TelemetryDataQualityMessageType = z
  .object({
    messageType: z.string(),
    deviceCount: int(),
    errorMessages: int(),
    messageCount: int(),
    errorRate: z.number(),
  })
  .meta({ id: 'TelemetryDataQualityMessageType' });

export const TelemetryDataQualityRecentError = z
  .object({
    deviceId: z.string(),
    ingestError: z.string(),
    messageType: z.string(),
    payloadSample: z.string(),
    subject: z.string(),
    receivedAt: dateTime,
  })
  .meta({ id: 'TelemetryDataQualityRecentError' });

export const TelemetryDataQualitySummary = z
  .object({
    assetsWithData: int(),
    delayedAssets: int(),
    errorAssets: int(),
    errorMessages: int(),
    gpsEvents: int(),
    messageCount: int(),
    offlineAssets: int(),
    onlineAssets: int(),
    parsedMessages: int(),
    poorGpsAssets: int(),
    recentErrorCount: int(),
    silentAssets: int(),
    silverEvents: int(),
    telemetryAssets: int(),
    totalAssets: int(),
    validGpsEvents: int(),
    coveragePercent: z.number(),
    errorRate: z.number(),
    gpsOkPercent: z.number(),
    qualityScore: z.number(),
    analyticsUpdatedAt: nullableDateTime,
  })
  .meta({ id: 'TelemetryDataQualitySummary' });

export const TelemetryDataQualityResponse = z
  .object({
    generatedAt: dateTime,
    from: dateTime,
    to: dateTime,
    telemetryEnabled: z.boolean(),
    capabilityState: z.enum(['not_configured', 'configured', 'configured_no_data']),
    assets: z.array(TelemetryDataQualityAsset),
    messageTypes: z.array(TelemetryDataQualityMessageType),
    recentErrors: z.array(TelemetryDataQualityRecentError),
    summary: TelemetryDataQualitySummary,
    paging: z
      .object({
        limit: int(),
        offset: int(),
        total: int().meta({ description: 'Entries matching status and q, over every page' }),
      })
      .optional()
      .meta({ description: 'Present only when limit or offset was asked: `assets` is then one page' }),
  })
  .meta({ id: 'TelemetryDataQualityResponse' });

export const TelemetryGeofence = z
  .object({
    id: uuid,
    name: z.string(),
    type: z.enum(['allowed', 'forbidden']),
    enabled: z.boolean(),
    geometry: GeoJSONGeometry,
    activeAlertCount: int(),
    assetCount: int(),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'TelemetryGeofence' });

export const TelemetryGeofenceListResponse = z
  .object({ items: z.array(TelemetryGeofence) })
  .meta({ id: 'TelemetryGeofenceListResponse' });

export const TelemetryGeofenceAlert = z
  .object({
    id: uuid,
    geofenceId: uuid,
    geofenceName: z.string(),
    assetId: uuid,
    asset: AssetRef,
    alertType: z.string(),
    status: z.enum(['open', 'acknowledged']),
    isActive: z.boolean(),
    createdAt: nullableDateTime,
    acknowledgedAt: nullableDateTime,
    resolvedAt: nullableDateTime,
  })
  .meta({ id: 'TelemetryGeofenceAlert' });

export const TelemetryGeofenceAlertListResponse = z
  .object({ items: z.array(TelemetryGeofenceAlert), paging: Paging, range: TimeRange })
  .meta({ id: 'TelemetryGeofenceAlertListResponse' });

export type TelemetryDeviceBody = z.infer<typeof TelemetryDevice>;
export type TelemetryGeofenceAlertBody = z.infer<typeof TelemetryGeofenceAlert>;
export type TelemetryGeofenceBody = z.infer<typeof TelemetryGeofence>;
