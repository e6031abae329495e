import { deviceMessageTypes, readingTypes } from '@gantry/contracts';
import { COUNTER_WINDOW_HOURS, counterWindowColumns, dataAsOfSql, type Queryable } from '@gantry/db';
import { isoTextSql } from '../../http/export.ts';
import type { ResolvedRange } from '../../http/query.ts';
import { HOUR_MS, wholeHours, type HourRange } from './counts.repository.ts';
import { dataQualityStatuses, type DataQualityStatus } from './schemas.ts';
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

/** A message with an error as the statement reads it: device key, topic, type, error, detail, received at, payload head (hex), payload size. */
type ErrorArray = [string | null, string, string | null, string | null, string | null, string, string, number];

/**
 * One device's entry as the statement assesses it (entryFields' values, in that order):
 * its asset, its counts over the hours, the percentages and the status, and its last
 * times as epoch milliseconds.
 */
interface EntryRow {
  deviceId: string;
  enabled: boolean;
  onlineStatus: string;
  status: DataQualityStatus;
  assetId: string;
  name: string;
  identifier: string;
  displayCode: string;
  assetTypeName: string;
  errorRate: number;
  gpsOkPercent: number | null;
  adcinEvents: number;
  errorMessages: number;
  gpsEvents: number;
  heartbeatEvents: number;
  hourmeterEvents: number;
  imuEvents: number;
  messageCount: number;
  parsedMessages: number;
  silverEvents: number;
  validGpsEvents: number;
  timedMessages: number;
  delayedMessages: number;
  manyErrors: boolean;
  poorGps: boolean;
  delayed: boolean;
  lastAdcinAt: number | null;
  lastGpsAt: number | null;
  lastHeartbeatAt: number | null;
  lastImuAt: number | null;
  lastSeenAt: number | null;
}

/** What the statement gives: one row, its lists as JSON PostgreSQL builds. */
interface DataQualityRead {
  at: Date;
  /** Whether the counts read cover the hours asked for (the counter window may not yet have moved on). */
  countsHeld: boolean;
  totalAssets: number;
  /**
   * summaryFields' values; then per known message type (deviceMessageTypes order) the
   * devices with a message of it and its messages; then how many entries match the view.
   */
  summary: number[];
  /** Per topic type with errors: [type, devices, messages with an error, rejected]. */
  typeErrors: Array<[string, number, number, number]>;
  entries: unknown[][] | null;
  recentErrors: ErrorArray[];
}

/** The figures the statement computes for each device, over the devices in scope (`figures`). */
const entryFields = [
  ['deviceId', 'device_id'],
  ['enabled', 'enabled'],
  ['onlineStatus', 'online_status'],
  ['status', 'status'],
  ['assetId', 'asset_id'],
  ['name', 'name'],
  ['identifier', 'identifier'],
  ['displayCode', 'display_code'],
  ['assetTypeName', 'asset_type_name'],
  ['errorRate', 'error_rate'],
  ['gpsOkPercent', 'gps_ok_percent'],
  ['adcinEvents', 'adcin_readings'],
  ['errorMessages', 'error_messages'],
  ['gpsEvents', 'gps_readings'],
  ['heartbeatEvents', 'heartbeat_readings'],
  ['hourmeterEvents', 'hourmeter_readings'],
  ['imuEvents', 'imu_readings'],
  ['messageCount', 'message_count'],
  ['parsedMessages', 'parsed_messages'],
  ['silverEvents', 'silver_events'],
  ['validGpsEvents', 'valid_gps_fixes'],
  ['timedMessages', 'timed_messages'],
  ['delayedMessages', 'delayed_messages'],
  ['manyErrors', 'many_errors'],
  ['poorGps', 'poor_gps'],
  ['delayed', 'delayed'],
  ['lastAdcinAt', 'epoch_ms(adc_ts)'],
  ['lastGpsAt', 'epoch_ms(position_ts)'],
  ['lastHeartbeatAt', 'epoch_ms(heartbeat_ts)'],
  ['lastImuAt', 'epoch_ms(imu_ts)'],
  ['lastSeenAt', 'epoch_ms(last_seen_at)'],
] as const satisfies ReadonlyArray<readonly [keyof EntryRow, string]>;

/** The summary's sums and counts over every device in scope, in this order. */
const summaryFields = [
  ['devices', 'count(*)'],
  ['seenDevices', 'count(*) FILTER (WHERE seen)'],
  ['assetsWithData', 'count(*) FILTER (WHERE message_count > 0)'],
  ['onlineAssets', `count(*) FILTER (WHERE online_status = 'online')`],
  ['telemetryAssets', 'count(DISTINCT asset_id)'],
  ['errorMessages', 'sum(error_messages)'],
  ['gpsEvents', 'sum(gps_readings)'],
  ['messageCount', 'sum(message_count)'],
  ['parsedMessages', 'sum(message_count - rejected_messages)'],
  ['silverEvents', 'sum(silver_events)'],
  ['validGpsEvents', 'sum(valid_gps_fixes)'],
  ...dataQualityStatuses.map((status) => [status, `count(*) FILTER (WHERE status = '${status}')`] as const),
] as const;

type SummaryField = (typeof summaryFields)[number][0];

/** The counter columns of device_counts_hourly the statement sums (counterWindowColumns). */
const counted = counterWindowColumns;
const messageColumns = deviceMessageTypes.map((type) => `${type}_messages`);
const readingColumns = readingTypes.map((type) => `${type}_readings`);
/** The per-device numbers the summary, the message types and every entry need. */
const figureColumns = [...counted, 'message_count', 'error_messages', 'rejected_messages', 'silver_events'];

/**
 * `part / whole × 100` rounded to 2 places in float8, 0 when the whole is 0: `percent` of
 * sql.ts (Math.round(x × 100) / 100, halves up) computed in SQL. Statuses are decided on
 * these very numbers, so the statement and the answer never disagree at a threshold.
 */
function percentSql(part: string, whole: string, none = '0'): string {
  const scaled = `(((${part})::float8 / (${whole})::float8) * 100::float8 * 100::float8)`;
  return `CASE WHEN ${whole} > 0
            THEN (floor(${scaled}) + CASE WHEN ${scaled} - floor(${scaled}) >= 0.5::float8 THEN 1 ELSE 0 END) / 100::float8
            ELSE ${none} END`;
}

/**
 * Everything the report needs, in one statement (one snapshot, one round trip): the devices
 * in scope, each assessed from its counters over the hours — counts, percentages, status —
 * the summary over all of them, the entries the view asks for (a page of them, or all),
 * the message types and the latest messages with an error. Lists come as JSON PostgreSQL
 * builds, times as epoch milliseconds: a page reads the devices once and sends 100.
 *
 * The counters: for the default range (the open hour and the 24 before it), the counter
 * window's row per device for the closed hours beside the open hour's row
 * (packages/db/src/counter-window.ts); for any other range, or before the worker moved the
 * window on when an hour closed, the hourly rows. For a key that sees the whole tenant
 * they are read by tenant alone (no semi-join on the devices) and joined to the devices
 * in scope.
 */
export function dataQualityStatement(
  scope: TelemetryScope,
  hours: HourRange,
  assetId: string | undefined,
  rules: StatusRules,
  view: DataQualityView = {},
  fromWindow = false,
): { text: string; values: unknown[] } {
  const params = new SqlParams();
  const conditions = [assetScopeCondition(params, scope)];
  if (assetId) conditions.push(`a.id = ${params.add(assetId, 'uuid')}`);
  const inScope = conditions.join(' AND ');
  const tenant = params.add(scope.tenantId, 'uuid');
  const from = params.add(hours.from, 'timestamptz');
  const to = params.add(hours.to, 'timestamptz');
  const maxErrorRate = params.add(rules.maxErrorRatePercent, 'float8');
  const minGpsFixes = params.add(rules.minGpsFixes, 'float8');
  const minGpsOk = params.add(rules.minGpsOkPercent, 'float8');
  const delayedShare = params.add(dataQualityRules.delayedShare, 'float8');
  // The rules on a row `r` of per-device counts: the percentages shown and the statuses they decide.
  const rates = {
    errorRate: (r: string) => percentSql(`${r}.error_messages`, `${r}.message_count`),
    gpsOkPercent: (r: string) => percentSql(`${r}.valid_gps_fixes`, `${r}.gps_readings`, 'NULL'),
  };
  const flags = {
    manyErrors: (r: string) => `${rates.errorRate(r)} > ${maxErrorRate}`,
    poorGps: (r: string) =>
      `(${r}.gps_readings > 0 AND ${r}.gps_readings >= ${minGpsFixes} AND ${rates.gpsOkPercent(r)} < ${minGpsOk})`,
    delayed: (r: string) =>
      `coalesce(CASE WHEN ${r}.timed_messages > 0 THEN ${r}.delayed_messages::float8 / ${r}.timed_messages::float8 > ${delayedShare} END, false)`,
  };
  const selected = [
    view.statuses ? `status = ANY (${params.add([...view.statuses], 'text[]')})` : 'TRUE',
    view.q !== undefined
      ? `(strpos(lower(name), ${params.add(view.q.toLowerCase(), 'text')}) > 0
          OR strpos(lower(identifier), ${params.add(view.q.toLowerCase(), 'text')}) > 0
          OR strpos(lower(device_id), ${params.add(view.q.toLowerCase(), 'text')}) > 0)`
      : 'TRUE',
  ].join(' AND ');
  const page = view.page
    ? ` LIMIT ${params.add(view.page.limit, 'integer')} OFFSET ${params.add(view.page.offset, 'integer')}`
    : '';
  return {
    text: `/* api:dataQuality */
     WITH tallied AS (
       -- Each device in scope with its counts over the hours. Only tables are joined and the
       -- counts are looked up device by device through the counters' keys, so whatever the
       -- planner believes of tables never analysed (after a bulk import), the work stays one
       -- pass over the devices: a join of the devices with the counts as a subquery, each
       -- estimated at one row, rescanned the counts for every device (21 s at 10,000).
       SELECT d.id, d.device_id, d.enabled, ${onlineStatusSql(rules)} AS online_status, a.id AS asset_id, a.name,
              a.identifier, s.last_seen_at IS NOT NULL AS seen,
              ${counted.map((column) => `coalesce(c.${column}, 0) AS ${column}`).join(', ')},
              coalesce(${messageColumns.map((column) => `c.${column}`).join(' + ')}, 0) + coalesce(e.other, 0) AS message_count,
              coalesce(e.errors, 0) AS error_messages, coalesce(e.rejected, 0) AS rejected_messages,
              coalesce(${readingColumns.map((column) => `c.${column}`).join(' + ')}, 0) AS silver_events
         FROM devices d
         JOIN assets a ON a.id = d.asset_id
         LEFT JOIN device_state s ON s.device_id = d.id
         ${
           fromWindow
             ? `-- The window's row and the open hour's (integers summed: bigint, not numeric).
         LEFT JOIN device_counts_window w ON w.tenant_id = ${tenant} AND w.device_id = d.id
         LEFT JOIN LATERAL (
           SELECT ${counted.map((column) => `sum(h.${column})::bigint AS ${column}`).join(', ')}
             FROM device_counts_hourly h WHERE h.device_id = d.id AND h.bucket = ${to} - INTERVAL '1 hour') h ON true
         CROSS JOIN LATERAL (
           SELECT ${counted.map((column) => `coalesce(w.${column}, 0) + coalesce(h.${column}, 0) AS ${column}`).join(', ')}) c`
             : `LEFT JOIN LATERAL (
           SELECT ${counted.map((column) => `sum(h.${column})::bigint AS ${column}`).join(', ')}
             FROM device_counts_hourly h WHERE h.device_id = d.id AND h.bucket >= ${from} AND h.bucket < ${to}) c ON true`
         }
         -- Messages with an error (message_errors_hourly: every rejected or partly stored
         -- message of a known device); a topic type that is none of the message types is
         -- all errors.
         LEFT JOIN LATERAL (
           SELECT sum(x.message_count) AS errors,
                  coalesce(sum(x.message_count) FILTER (WHERE x.status = 'rejected'), 0) AS rejected,
                  coalesce(sum(x.message_count) FILTER (WHERE x.message_type <> ALL (${params.add([...deviceMessageTypes], 'text[]')})), 0) AS other
             FROM message_errors_hourly x WHERE x.device_id = d.id AND x.bucket >= ${from} AND x.bucket < ${to}) e ON true
        WHERE d.tenant_id = ${tenant} AND ${inScope}
     ), figures AS MATERIALIZED (
       -- Each device in scope with its counts and its status, the first that applies.
       SELECT t.id, t.device_id, t.enabled, t.online_status, t.asset_id, t.name, t.identifier, t.seen,
              ${figureColumns.map((column) => `t.${column}`).join(', ')},
              CASE WHEN NOT t.enabled THEN 'disabled'
                        WHEN t.online_status IN ('offline', 'unknown') THEN 'offline'
                        WHEN t.online_status = 'silent' THEN 'silent'
                        WHEN ${flags.manyErrors('t')} THEN 'errors'
                        WHEN ${flags.poorGps('t')} THEN 'poor_gps'
                        WHEN ${flags.delayed('t')} THEN 'delayed'
                        ELSE 'ok' END AS status
         FROM tallied t
     ), chosen AS (
       -- The entries asked for, with their asset's and state's fields and their percentages.
       SELECT f.*, a.display_code, coalesce(ty.name, '') AS asset_type_name, st.last_seen_at, st.adc_ts, st.position_ts,
              st.heartbeat_ts, st.imu_ts, ${rates.errorRate('f')} AS error_rate, ${rates.gpsOkPercent('f')} AS gps_ok_percent,
              f.message_count - f.rejected_messages AS parsed_messages, ${flags.manyErrors('f')} AS many_errors,
              ${flags.poorGps('f')} AS poor_gps, ${flags.delayed('f')} AS delayed
         FROM (SELECT * FROM figures WHERE ${selected} ORDER BY name, asset_id, device_id${page}) f
         JOIN assets a ON a.id = f.asset_id
         LEFT JOIN asset_types ty ON ty.id = a.asset_type_id
         LEFT JOIN device_state st ON st.device_id = f.id
     )
     SELECT ${dataAsOfSql('statement_timestamp()')} AS at,
            ${
              fromWindow ? `coalesce((SELECT window_start = ${from} FROM device_counts_window_start), false)` : 'true'
            } AS "countsHeld",
            (SELECT count(*)::int FROM assets a WHERE ${inScope}) AS "totalAssets",
            (SELECT json_build_array(${[
              ...summaryFields.map(([, sql]) => `coalesce(${sql}, 0)`),
              ...messageColumns.flatMap((column) => [
                `count(*) FILTER (WHERE ${column} > 0)`,
                `coalesce(sum(${column}), 0)`,
              ]),
              `count(*) FILTER (WHERE ${selected})`,
            ].join(', ')}) FROM figures) AS summary,
            (SELECT coalesce(json_agg(json_build_array(message_type, devices, errors, rejected)), '[]')
               FROM (SELECT x.message_type, count(DISTINCT x.device_id) AS devices, sum(x.message_count) AS errors,
                            coalesce(sum(x.message_count) FILTER (WHERE x.status = 'rejected'), 0) AS rejected
                       FROM devices d
                       JOIN assets a ON a.id = d.asset_id
                       JOIN message_errors_hourly x ON x.device_id = d.id AND x.bucket >= ${from} AND x.bucket < ${to}
                      WHERE d.tenant_id = ${tenant} AND ${inScope} AND x.message_count > 0
                      GROUP BY x.message_type) t) AS "typeErrors",
            (SELECT json_agg(json_build_array(${entryFields.map(([, sql]) => sql).join(', ')}) ORDER BY name, asset_id, device_id)
               FROM chosen) AS entries,
            (SELECT coalesce(json_agg(json_build_array(
                      e.device_key, e.topic, e.message_type, e.error, e.error_detail, ${isoTextSql('e.received_at')},
                      encode(e.payload_head, 'hex'), e.payload_size)
                    ORDER BY e.received_at DESC, e.id DESC), '[]')
               FROM (SELECT m.id, m.device_key, m.topic, m.message_type, m.error, m.error_detail, m.received_at,
                            substring(m.payload FROM 1 FOR ${dataQualityRules.payloadSampleChars * 4}) AS payload_head,
                            m.payload_size
                       FROM device_message_rows m
                      WHERE m.tenant_id = ${tenant}
                        AND m.status IN ('rejected', 'partial')
                        AND m.received_at >= ${from}
                        AND m.received_at < ${to}
                        AND EXISTS (SELECT 1 FROM devices d JOIN assets a ON a.id = d.asset_id
                                     WHERE d.id = m.device_id AND ${inScope})
                      ORDER BY m.received_at DESC, m.id DESC
                      LIMIT ${dataQualityRules.recentErrors}) AS e) AS "recentErrors"`.replaceAll(
      /epoch_ms\((\w+)\)/g,
      'floor(extract(epoch FROM $1) * 1000)',
    ),
    values: params.values,
  };
}

function toEntryRow(values: unknown[]): EntryRow {
  return Object.fromEntries(entryFields.map(([name], index) => [name, values[index]])) as unknown as EntryRow;
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

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** An entry of the answer from the statement's assessment: its notes say why its status is what it is. */
function toEntry(row: EntryRow, rules: StatusRules) {
  const lastSeenAt = iso(row.lastSeenAt);
  const notes: string[] = [];
  if (!row.enabled) notes.push('device is disabled: its messages are kept but not derived');
  // A disabled device's messages are kept in bronze without touching its state.
  if (lastSeenAt === null) {
    if (row.messageCount === 0) notes.push('no message received yet');
  } else if (row.onlineStatus === 'offline' || row.onlineStatus === 'silent')
    notes.push(`last message received ${lastSeenAt}`);
  if (row.manyErrors)
    notes.push(`${row.errorRate} % of messages with errors (more than ${rules.maxErrorRatePercent} %)`);
  if (row.poorGps)
    notes.push(`${row.gpsOkPercent} % of ${row.gpsEvents} GPS fixes valid (less than ${rules.minGpsOkPercent} %)`);
  if (row.delayed)
    notes.push(
      `median receive delay above 5 minutes (${round((row.delayedMessages / row.timedMessages) * 100)} % of messages late)`,
    );
  if (row.messageCount === 0 && lastSeenAt !== null) notes.push('no message in the range');
  return {
    assetId: row.assetId,
    name: row.name,
    identifier: row.identifier,
    displayCode: row.displayCode,
    assetTypeName: row.assetTypeName,
    deviceId: row.deviceId,
    status: row.status,
    statusLabel: statusLabels[row.status],
    notes,
    enabled: row.enabled,
    errorRate: row.errorRate,
    gpsOkPercent: row.gpsOkPercent,
    adcinEvents: row.adcinEvents,
    errorMessages: row.errorMessages,
    gpsEvents: row.gpsEvents,
    heartbeatEvents: row.heartbeatEvents,
    hourmeterEvents: row.hourmeterEvents,
    imuEvents: row.imuEvents,
    messageCount: row.messageCount,
    parsedMessages: row.parsedMessages,
    silverEvents: row.silverEvents,
    validGpsEvents: row.validGpsEvents,
    lastAdcinAt: iso(row.lastAdcinAt),
    lastGpsAt: iso(row.lastGpsAt),
    lastHeartbeatAt: iso(row.lastHeartbeatAt),
    lastImuAt: iso(row.lastImuAt),
    lastSeenAt,
  };
}

/** The message types with any message in scope, by name: the known types' counts and every topic type's errors. */
function toMessageTypes(read: DataQualityRead) {
  const types = new Map<string, { deviceCount: number; messageCount: number; errorMessages: number }>();
  const known = summaryFields.length;
  deviceMessageTypes.forEach((messageType, index) => {
    const messageCount = Number(read.summary[known + 2 * index + 1]);
    if (messageCount > 0)
      types.set(messageType, { deviceCount: Number(read.summary[known + 2 * index]), messageCount, errorMessages: 0 });
  });
  const knownTypes = new Set<string>(deviceMessageTypes);
  for (const [messageType, devices, errors] of read.typeErrors) {
    const entry = types.get(messageType);
    // Every message with an error of a known type is one of its messages, so the entry exists.
    if (entry) entry.errorMessages = errors;
    else if (!knownTypes.has(messageType))
      types.set(messageType, { deviceCount: devices, messageCount: errors, errorMessages: errors });
  }
  return [...types.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([messageType, figures]) => ({
      messageType,
      deviceCount: figures.deviceCount,
      errorMessages: figures.errorMessages,
      messageCount: figures.messageCount,
      errorRate: percent(figures.errorMessages, figures.messageCount),
    }));
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
  const ask = async (fromWindow: boolean) => {
    const { text, values } = dataQualityStatement(scope, hours, assetId, rules, view, fromWindow);
    return (await pool.query<DataQualityRead>(text, values)).rows[0]!;
  };
  // The default range (the open hour and the 24 before it) from the counter window; the
  // statement says whether the window held those hours when it read it (not in the seconds
  // after an hour closed, before the worker moved it on), and otherwise the hourly rows answer.
  const windowShaped = hours.to.getTime() - hours.from.getTime() === (COUNTER_WINDOW_HOURS + 1) * HOUR_MS;
  let read = windowShaped ? await ask(true) : null;
  if (!read?.countsHeld) read = await ask(false);
  const summed = Object.fromEntries(
    summaryFields.map(([name], index) => [name, Number(read.summary[index])]),
  ) as Record<SummaryField, number>;
  const errors = read.recentErrors.map(toRecentError);
  const scored = summed.devices - summed.disabled;
  const scores = (Object.keys(statusScores) as Array<keyof typeof statusScores>).reduce(
    (total, status) => total + statusScores[status] * summed[status],
    0,
  );

  return {
    generatedAt: read.at.toISOString(),
    from: hours.from.toISOString(),
    // A date-only `to` is already a whole hour and keeps its shown form (the day's last millisecond).
    to: hours.to.getTime() === range.to.getTime() ? range.echo.to : hours.to.toISOString(),
    telemetryEnabled: summed.devices > 0,
    capabilityState:
      summed.devices === 0
        ? ('not_configured' as const)
        : summed.seenDevices > 0
          ? ('configured' as const)
          : ('configured_no_data' as const),
    assets: (read.entries ?? []).map((values) => toEntry(toEntryRow(values), rules)),
    messageTypes: toMessageTypes(read),
    recentErrors: errors,
    summary: {
      assetsWithData: summed.assetsWithData,
      delayedAssets: summed.delayed,
      errorAssets: summed.errors,
      errorMessages: summed.errorMessages,
      gpsEvents: summed.gpsEvents,
      messageCount: summed.messageCount,
      offlineAssets: summed.offline,
      onlineAssets: summed.onlineAssets,
      parsedMessages: summed.parsedMessages,
      poorGpsAssets: summed.poor_gps,
      recentErrorCount: errors.length,
      silentAssets: summed.silent,
      silverEvents: summed.silverEvents,
      telemetryAssets: summed.telemetryAssets,
      totalAssets: read.totalAssets,
      validGpsEvents: summed.validGpsEvents,
      coveragePercent: percent(summed.assetsWithData, summed.devices),
      errorRate: percent(summed.errorMessages, summed.messageCount),
      gpsOkPercent: percent(summed.validGpsEvents, summed.gpsEvents),
      qualityScore: scored > 0 ? round(scores / scored) : 0,
      // The counters hold every batch committed before the snapshot the answer was read in.
      analyticsUpdatedAt: read.at.toISOString(),
    },
    ...(view.page ? { paging: { ...view.page, total: Number(read.summary[read.summary.length - 1]) } } : {}),
  };
}
