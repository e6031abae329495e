// Derived statuses of DESIGN §3, as SQL so lists can filter and sort on them.

/** A device is online when its last message arrived at most this long ago. */
export const ONLINE_WITHIN_SECONDS = 10 * 60;
/** … silent up to this long, offline beyond. */
export const SILENT_WITHIN_SECONDS = 24 * 60 * 60;

/**
 * Device online status from the device row `d` and its state row `s`: disabled, unknown
 * (never seen), online (≤ 10 min), silent (≤ 24 h) or offline. "Last message" is the
 * receive time, so a device uploading hours of buffered data counts as online.
 */
export const onlineStatusSql = `CASE
    WHEN NOT d.enabled THEN 'disabled'
    WHEN s.last_seen_at IS NULL THEN 'unknown'
    WHEN s.last_seen_at >= now() - make_interval(secs => ${ONLINE_WITHIN_SECONDS}) THEN 'online'
    WHEN s.last_seen_at >= now() - make_interval(secs => ${SILENT_WITHIN_SECONDS}) THEN 'silent'
    ELSE 'offline'
  END`;

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
