// Numbers, times and statuses as people read them. Every status has a word as well as a
// colour, so nothing is told by colour alone.

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const oneDecimal = new Intl.NumberFormat(undefined, { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const timeOfDay = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const hourMinute = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const dateTime = new Intl.DateTimeFormat(undefined, {
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
});
const dayOnly = new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric' });

export const count = (value) => (value === null || value === undefined ? '—' : integer.format(value));
export const percent = (value) => (value === null || value === undefined ? '—' : `${oneDecimal.format(value)} %`);
export const time = (value) => (value ? timeOfDay.format(new Date(value)) : '—');
export const clock = (value) => (value ? hourMinute.format(new Date(value)) : '—');
export const when = (value) => (value ? dateTime.format(new Date(value)) : '—');
export const day = (value) => (value ? dayOnly.format(new Date(value)) : '—');
export const km = (metres) =>
  metres === null || metres === undefined ? '—' : `${oneDecimal.format(metres / 1000)} km`;
export const hours = (seconds) =>
  seconds === null || seconds === undefined ? '—' : `${oneDecimal.format(seconds / 3600)} h`;

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return '—';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** "12 s ago", "4 min ago", "3 h ago", or the date beyond a day. */
export function ago(value, now = Date.now()) {
  if (!value) return 'never';
  const seconds = Math.max(0, Math.round((now - Date.parse(value)) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return when(value);
}

/** Device online status → label and tone (the CSS has one colour per tone). */
export const onlineStatus = {
  online: { label: 'Online', tone: 'good' },
  silent: { label: 'Silent', tone: 'warn' },
  offline: { label: 'Offline', tone: 'bad' },
  unknown: { label: 'Never seen', tone: 'muted' },
  disabled: { label: 'Disabled', tone: 'muted' },
};

/** Data-quality status → tone; the label comes from the API's statusLabel. */
export const qualityTone = {
  ok: 'good',
  delayed: 'warn',
  poor_gps: 'warn',
  silent: 'warn',
  errors: 'bad',
  offline: 'bad',
  disabled: 'muted',
};

/** Fill colours of the map markers, the same hues as the badges. */
export const toneColour = { good: '#1f883d', warn: '#d4a72c', bad: '#cf222e', muted: '#8c959f' };

export const workState = { loaded: 'Loaded', empty: 'Empty', off: 'Engine off', unknown: 'Unknown' };

export const alertType = {
  forbidden_enter: 'Entered a forbidden zone',
  allowed_exit: 'Left an allowed zone',
};

export function errorText(error) {
  if (!error) return '';
  if (error.status === 429) return 'The API is asking us to slow down (rate limit); retrying shortly.';
  return error.status ? `${error.message} (HTTP ${error.status})` : error.message;
}

/** UTC date (YYYY-MM-DD) of a time: the API reads a date-only range as whole UTC days. */
export const utcDate = (ms) => new Date(ms).toISOString().slice(0, 10);
