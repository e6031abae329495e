import type { Config } from '@gantry/config';

// The derived device statuses of docs/telemetry-api.md (Resources), as SQL so lists can
// filter and sort on them.

export type StatusRules = Config['telemetryStatus'];

/**
 * Device online status from the device row `d` and its state row `s`: disabled, unknown
 * (never seen), online (≤ 10 min by default), silent (≤ 24 h) or offline. "Last message"
 * is the receive time, so a device uploading hours of buffered data counts as online.
 * The thresholds are validated integers from the configuration, never request input.
 */
export function onlineStatusSql(rules: StatusRules): string {
  return `CASE
    WHEN NOT d.enabled THEN 'disabled'
    WHEN s.last_seen_at IS NULL THEN 'unknown'
    WHEN s.last_seen_at >= now() - make_interval(secs => ${Number(rules.onlineSeconds)}) THEN 'online'
    WHEN s.last_seen_at >= now() - make_interval(secs => ${Number(rules.silentSeconds)}) THEN 'silent'
    ELSE 'offline'
  END`;
}

/** Raw ADC input as the device reported it last. */
export const adcStateSql = `CASE s.adc_on WHEN true THEN 'on' WHEN false THEN 'off' ELSE 'unknown' END`;

/**
 * What the machine is doing as far as the latest state tells: off (ignition reported
 * off), loaded (spreader locked), empty (spreader open), unknown (no ADC state yet).
 */
export const workStateSql = `CASE
    WHEN s.ignition IS FALSE THEN 'off'
    WHEN s.adc_on IS TRUE THEN 'loaded'
    WHEN s.adc_on IS FALSE THEN 'empty'
    ELSE 'unknown'
  END`;
