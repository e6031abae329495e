import { readingTypes, type ReadingType } from '@gantry/contracts';
import { dataAsOfSql, type Queryable } from '@gantry/db';
import { isoTextSql } from '../../http/export.ts';
import type { ResolvedRange } from '../../http/query.ts';
import {
  counterColumnsSql,
  toDeviceCountList,
  wholeHours,
  type CounterColumns,
  type DeviceCounts,
  type HourRange,
} from './counts.repository.ts';
import type { DataQualityStatus } from './schemas.ts';
import { assetScopeCondition, percent, round, SqlParams, type TelemetryScope } from './sql.ts';
import { onlineStatusSql, type StatusRules } from './status.ts';

/** Fixed parts of the report; the status thresholds come from the configuration (StatusRules). */
export const dataQualityRules = {
  /**
   * delayed: the median receive delay exceeds 5 minutes, i.e. more than half the timed
   * messages arrived over 5 minutes late (the 5 minutes are in the gold definition).
   */
  delayedShare: 0.5,
  recentErrors: 20,
  payloadSampleChars: 200,
};

const statusLabels: Record<DataQualityStatus, string> = {
  ok: 'OK',
  delayed: 'Delayed data',
  offline: 'Offline',
  silent: 'Silent',
  poor_gps: 'Poor GPS',
  errors: 'High error rate',
  disabled: 'Disabled',
};

/** Weight of each status in the quality score (disabled devices are left out). */
const statusScores: Record<Exclude<DataQualityStatus, 'disabled'>, number> = {
  ok: 100,
  delayed: 80,
  poor_gps: 70,
  errors: 50,
  silent: 30,
  offline: 0,
};

/** A device in scope as the statement reads it (timestamps already in the API's text form). */
interface DeviceRow {
  id: string;
  deviceId: string;
  enabled: boolean;
  onlineStatus: string;
  assetId: string;
  name: string;
  identifier: string;
  displayCode: string;
  assetTypeName: string;
  lastSeenAt: string | null;
  lastAdcinAt: string | null;
  lastGpsAt: string | null;
  lastHeartbeatAt: string | null;
  lastImuAt: string | null;
}

/** A device as the statement reads it: deviceFields' values, in that order. */
type DeviceArray = [
  string,
  string,
  boolean,
  string,
  string,
  string,
  string,
  string,
  string,
  string | null,
  string | null,
  string | null,
  string | null,
  string | null,
];

/** A message with an error as the statement reads it: device key, topic, type, error, detail, received at, payload head (hex), payload size. */
type ErrorArray = [string | null, string, string | null, string | null, string | null, string, string, number];

interface DataQualityRead extends CounterColumns {
  at: Date;
  totalAssets: number;
  devices: DeviceArray[];
  recentErrors: ErrorArray[];
}

/**
 * Everything the report reads, in one statement (so one snapshot, one round trip):
 * the devices in scope with their state, the number of assets in scope, the counters
 * of the hours and the latest messages with an error. The lists come as JSON arrays
 * PostgreSQL builds, timestamps formatted there: the driver parses a handful of fields
 * instead of ~50,000, and no Date is parsed or formatted in Node.
 *
 * For a key that sees the whole tenant the counters are read by tenant alone (no
 * semi-join on the devices, a quarter of the statement) and the caller keeps the
 * devices in scope.
 */
export function dataQualityStatement(
  scope: TelemetryScope,
  hours: HourRange,
  assetId: string | undefined,
  rules: StatusRules,
): { text: string; values: unknown[] } {
  const params = new SqlParams();
  const conditions = [assetScopeCondition(params, scope)];
  if (assetId) conditions.push(`a.id = ${params.add(assetId, 'uuid')}`);
  const inScope = conditions.join(' AND ');
  const wholeTenant = scope.customerName === null && !assetId;
  const counters = counterColumnsSql(
    { tenantId: scope.tenantId, devices: wholeTenant ? 'tenant' : { inQuery: 'SELECT id FROM scoped' }, ...hours },
    params,
  );
  return {
    text: `/* api:dataQuality */
     WITH scoped AS MATERIALIZED (
       SELECT d.id, d.device_id, d.enabled, ${onlineStatusSql(rules)} AS online_status, a.id AS asset_id, a.name,
              a.identifier, a.display_code, coalesce(t.name, '') AS asset_type_name,
              s.last_seen_at, s.adc_ts, s.position_ts, s.heartbeat_ts, s.imu_ts
         FROM devices d
         JOIN assets a ON a.id = d.asset_id
         LEFT JOIN asset_types t ON t.id = a.asset_type_id
         LEFT JOIN device_state s ON s.device_id = d.id
        WHERE ${inScope}
     )
     SELECT ${dataAsOfSql('statement_timestamp()')} AS at,
            (SELECT count(*)::int FROM assets a WHERE ${inScope}) AS "totalAssets",
            (SELECT coalesce(json_agg(json_build_array(
                      id, device_id, enabled, online_status, asset_id, name, identifier, display_code, asset_type_name,
                      ${isoTextSql('last_seen_at')}, ${isoTextSql('adc_ts')}, ${isoTextSql('position_ts')},
                      ${isoTextSql('heartbeat_ts')}, ${isoTextSql('imu_ts')})
                    ORDER BY name, asset_id, device_id), '[]')
               FROM scoped) AS devices,
            ${counters},
            (SELECT coalesce(json_agg(json_build_array(
                      e.device_key, e.topic, e.message_type, e.error, e.error_detail, ${isoTextSql('e.received_at')},
                      encode(e.payload_head, 'hex'), e.payload_size)
                    ORDER BY e.received_at DESC, e.id DESC), '[]')
               FROM (SELECT m.id, m.device_key, m.topic, m.message_type, m.error, m.error_detail, m.received_at,
                            substring(m.payload FROM 1 FOR ${dataQualityRules.payloadSampleChars * 4}) AS payload_head,
                            m.payload_size
                       FROM device_message_rows m
                      WHERE m.tenant_id = ${params.add(scope.tenantId, 'uuid')}
                        AND m.status IN ('rejected', 'partial')
                        AND m.received_at >= ${params.add(hours.from, 'timestamptz')}
                        AND m.received_at < ${params.add(hours.to, 'timestamptz')}
                        AND m.device_id IN (SELECT id FROM scoped)
                      ORDER BY m.received_at DESC, m.id DESC
                      LIMIT ${dataQualityRules.recentErrors}) AS e) AS "recentErrors"`,
    values: params.values,
  };
}

async function readReport(
  db: Queryable,
  scope: TelemetryScope,
  hours: HourRange,
  assetId: string | undefined,
  rules: StatusRules,
): Promise<DataQualityRead> {
  const { text, values } = dataQualityStatement(scope, hours, assetId, rules);
  const { rows } = await db.query<DataQualityRead>(text, values);
  return rows[0]!;
}

/** DeviceRow's fields in the order of the statement's device arrays (readReport). */
const deviceFields = [
  'id',
  'deviceId',
  'enabled',
  'onlineStatus',
  'assetId',
  'name',
  'identifier',
  'displayCode',
  'assetTypeName',
  'lastSeenAt',
  'lastAdcinAt',
  'lastGpsAt',
  'lastHeartbeatAt',
  'lastImuAt',
] as const satisfies ReadonlyArray<keyof DeviceRow>;

function toDeviceRow(row: DeviceArray): DeviceRow {
  return Object.fromEntries(deviceFields.map((name, index) => [name, row[index]])) as unknown as DeviceRow;
}

function toRecentError([
  deviceKey,
  topic,
  messageType,
  error,
  detail,
  receivedAt,
  payloadHex,
  payloadSize,
]: ErrorArray) {
  return {
    deviceId: deviceKey ?? '',
    ingestError: [error, detail].filter(Boolean).join(': '),
    messageType: messageType ?? '',
    payloadSample: payloadSample(Buffer.from(payloadHex, 'hex'), payloadSize),
    subject: topic,
    receivedAt,
  };
}

/** The start of a payload as text (invalid UTF-8 shown as U+FFFD), cut with an ellipsis. */
export function payloadSample(head: Buffer, totalBytes: number): string {
  const text = new TextDecoder('utf-8', { fatal: false })
    .decode(head)
    .replace(/\p{Cc}/gu, (char) => (char === '\n' || char === '\t' ? char : ' '));
  const max = dataQualityRules.payloadSampleChars;
  const chars = Array.from(text);
  if (chars.length > max) return `${chars.slice(0, max).join('')}…`;
  return head.length < totalBytes ? `${text}…` : text;
}

function sum<T>(rows: T[], pick: (row: T) => number): number {
  return rows.reduce((total, row) => total + pick(row), 0);
}

function assessDevice(device: DeviceRow, counts: DeviceCounts | undefined, rules: StatusRules) {
  const messages = counts?.messages ?? [];
  const messageCount = sum(messages, (row) => row.messageCount);
  const errorMessages = sum(messages, (row) => row.errorCount);
  const parsedMessages = sum(messages, (row) => row.parsedCount);
  const timed = counts?.timedCount ?? 0;
  const delayed = counts?.delayedCount ?? 0;
  const events = (type: ReadingType) => counts?.readings[type] ?? 0;
  const gpsEvents = events('gps');
  const validGpsEvents = counts?.validGpsCount ?? 0;
  const errorRate = percent(errorMessages, messageCount);
  const gpsOkPercent = gpsEvents > 0 ? percent(validGpsEvents, gpsEvents) : null;
  const delayedShare = timed > 0 ? delayed / timed : 0;

  const notes: string[] = [];
  if (!device.enabled) notes.push('device is disabled: its messages are kept but not derived');
  // A disabled device's messages are kept in bronze without touching its state.
  if (device.lastSeenAt === null) {
    if (messageCount === 0) notes.push('no message received yet');
  } else if (device.onlineStatus === 'offline' || device.onlineStatus === 'silent')
    notes.push(`last message received ${device.lastSeenAt}`);
  if (errorRate > rules.maxErrorRatePercent)
    notes.push(`${errorRate} % of messages with errors (more than ${rules.maxErrorRatePercent} %)`);
  const poorGps = gpsOkPercent !== null && gpsEvents >= rules.minGpsFixes && gpsOkPercent < rules.minGpsOkPercent;
  if (poorGps) notes.push(`${gpsOkPercent} % of ${gpsEvents} GPS fixes valid (less than ${rules.minGpsOkPercent} %)`);
  if (delayedShare > dataQualityRules.delayedShare)
    notes.push(`median receive delay above 5 minutes (${round(delayedShare * 100)} % of messages late)`);
  if (messageCount === 0 && device.lastSeenAt !== null) notes.push('no message in the range');

  let status: DataQualityStatus;
  if (!device.enabled) status = 'disabled';
  else if (device.onlineStatus === 'offline' || device.onlineStatus === 'unknown') status = 'offline';
  else if (device.onlineStatus === 'silent') status = 'silent';
  else if (errorRate > rules.maxErrorRatePercent) status = 'errors';
  else if (poorGps) status = 'poor_gps';
  else if (delayedShare > dataQualityRules.delayedShare) status = 'delayed';
  else status = 'ok';

  return {
    assetId: device.assetId,
    name: device.name,
    identifier: device.identifier,
    displayCode: device.displayCode,
    assetTypeName: device.assetTypeName,
    deviceId: device.deviceId,
    status,
    statusLabel: statusLabels[status],
    notes,
    enabled: device.enabled,
    errorRate,
    gpsOkPercent,
    adcinEvents: events('adcin'),
    errorMessages,
    gpsEvents,
    heartbeatEvents: events('heartbeat'),
    hourmeterEvents: events('hourmeter'),
    imuEvents: events('imu'),
    messageCount,
    parsedMessages,
    silverEvents: readingTypes.reduce((total, type) => total + events(type), 0),
    validGpsEvents,
    lastAdcinAt: device.lastAdcinAt,
    lastGpsAt: device.lastGpsAt,
    lastHeartbeatAt: device.lastHeartbeatAt,
    lastImuAt: device.lastImuAt,
    lastSeenAt: device.lastSeenAt,
    onlineStatus: device.onlineStatus,
  };
}

function groupBy<T>(rows: T[], key: (row: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const list = groups.get(key(row)) ?? [];
    list.push(row);
    groups.set(key(row), list);
  }
  return groups;
}

/** Which entries the answer lists; the summary and message types always cover the whole scope. */
export interface DataQualityView {
  /** Only entries with one of these statuses. */
  statuses?: Set<DataQualityStatus>;
  /** Case-insensitive substring of the asset's name or identifier, or of the device id. */
  q?: string;
  /** One page of the matching entries; absent: all of them. */
  page?: { limit: number; offset: number };
}

function matchesView(view: DataQualityView) {
  const needle = view.q?.toLowerCase();
  return (entry: { status: DataQualityStatus; name: string; identifier: string; deviceId: string }) =>
    (view.statuses === undefined || view.statuses.has(entry.status)) &&
    (needle === undefined ||
      [entry.name, entry.identifier, entry.deviceId].some((text) => text.toLowerCase().includes(needle)));
}

/**
 * The entries the view asks for, with `paging` when it asked for a page. Every device is
 * assessed anyway (the summary counts them all), so filtering the assessed list is the
 * same one pass over the devices in scope; what a page saves is the answer's size.
 */
function selectEntries<T extends Parameters<ReturnType<typeof matchesView>>[0]>(entries: T[], view: DataQualityView) {
  const matching = view.statuses || view.q !== undefined ? entries.filter(matchesView(view)) : entries;
  if (!view.page) return { assets: matching };
  const { limit, offset } = view.page;
  return { assets: matching.slice(offset, offset + limit), paging: { limit, offset, total: matching.length } };
}

/**
 * The data-quality report over the whole UTC hours covering [from, to): one entry per
 * device (with its asset), message types, the latest messages with an error and a
 * summary. Counts come from ingest's hourly counters, which hold every committed batch,
 * so they are exact for the hours the answer echoes as `from`/`to`, as of `generatedAt`;
 * everything is read by one statement (readReport), so in one snapshot. Statuses use
 * the live online status.
 */
export async function readDataQuality(
  pool: Queryable,
  scope: TelemetryScope,
  range: ResolvedRange,
  assetId: string | undefined,
  rules: StatusRules,
  view: DataQualityView = {},
) {
  const hours = wholeHours(range);
  const read = await readReport(pool, scope, hours, assetId, rules);
  const devices = read.devices.map(toDeviceRow);
  const { totalAssets } = read;
  const errors = read.recentErrors.map(toRecentError);
  // Read by tenant, the counters may hold devices out of scope (of deleted assets): kept out.
  const deviceIds = new Set(devices.map((device) => device.id));
  const counts = toDeviceCountList(read).filter((entry) => deviceIds.has(entry.deviceId));
  const countsByDevice = new Map(counts.map((entry) => [entry.deviceId, entry]));
  const messages = counts.flatMap((entry) => entry.messages);
  const assessed = devices.map((device) => assessDevice(device, countsByDevice.get(device.id), rules));
  const assets = assessed.map(({ onlineStatus: _onlineStatus, ...entry }) => entry);

  const messageTypes = [...groupBy(messages, (row) => row.messageType).entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([messageType, rows]) => {
      const messageCount = sum(rows, (row) => row.messageCount);
      const errorMessages = sum(rows, (row) => row.errorCount);
      return {
        messageType,
        deviceCount: new Set(rows.filter((row) => row.messageCount > 0).map((row) => row.deviceId)).size,
        errorMessages,
        messageCount,
        errorRate: percent(errorMessages, messageCount),
      };
    });

  const count = (status: DataQualityStatus) => assets.filter((entry) => entry.status === status).length;
  const totals = {
    messageCount: sum(assets, (entry) => entry.messageCount),
    errorMessages: sum(assets, (entry) => entry.errorMessages),
    parsedMessages: sum(assets, (entry) => entry.parsedMessages),
    silverEvents: sum(assets, (entry) => entry.silverEvents),
    gpsEvents: sum(assets, (entry) => entry.gpsEvents),
    validGpsEvents: sum(assets, (entry) => entry.validGpsEvents),
  };
  const scored = assets.filter((entry) => entry.status !== 'disabled');
  const assetsWithData = assets.filter((entry) => entry.messageCount > 0).length;
  const anySeen = devices.some((device) => device.lastSeenAt !== null);
  const selected = selectEntries(assets, view);

  return {
    generatedAt: read.at.toISOString(),
    from: hours.from.toISOString(),
    // A date-only `to` is already a whole hour and keeps its shown form (the day's last millisecond).
    to: hours.to.getTime() === range.to.getTime() ? range.echo.to : hours.to.toISOString(),
    telemetryEnabled: devices.length > 0,
    capabilityState:
      devices.length === 0
        ? ('not_configured' as const)
        : anySeen
          ? ('configured' as const)
          : ('configured_no_data' as const),
    assets: selected.assets,
    messageTypes,
    recentErrors: errors,
    summary: {
      assetsWithData,
      delayedAssets: count('delayed'),
      errorAssets: count('errors'),
      errorMessages: totals.errorMessages,
      gpsEvents: totals.gpsEvents,
      messageCount: totals.messageCount,
      offlineAssets: count('offline'),
      onlineAssets: assessed.filter((entry) => entry.onlineStatus === 'online').length,
      parsedMessages: totals.parsedMessages,
      poorGpsAssets: count('poor_gps'),
      recentErrorCount: errors.length,
      silentAssets: count('silent'),
      silverEvents: totals.silverEvents,
      telemetryAssets: new Set(devices.map((device) => device.assetId)).size,
      totalAssets,
      validGpsEvents: totals.validGpsEvents,
      coveragePercent: percent(assetsWithData, assets.length),
      errorRate: percent(totals.errorMessages, totals.messageCount),
      gpsOkPercent: percent(totals.validGpsEvents, totals.gpsEvents),
      qualityScore:
        scored.length > 0
          ? round(sum(scored, (entry) => statusScores[entry.status as keyof typeof statusScores]) / scored.length)
          : 0,
      // The counters hold every batch committed before the snapshot the answer was read in.
      analyticsUpdatedAt: read.at.toISOString(),
    },
    ...(selected.paging ? { paging: selected.paging } : {}),
  };
}
