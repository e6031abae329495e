// How a time range maps onto the reporting rollups: whole UTC months and days come from
// the rollup tables, the partial days at the edges from the rows themselves. Pure
// functions, no I/O.

/** A time window; null bounds are open. */
export interface Window {
  from: Date | null;
  to: Date | null;
}

/** Half-open [from, to) of periods as YYYY-MM-DD; null bounds are open. */
export interface PeriodSpan {
  from: string | null;
  to: string | null;
}

export interface SplitRange {
  /** Whole months, from grain 'm' rows. */
  months: PeriodSpan | null;
  /** Whole days outside those months, from grain 'd' rows (at most two spans). */
  days: PeriodSpan[];
  /** Partial days at the edges, from the rows (at most two windows). */
  live: Window[];
}

const DAY_MS = 86_400_000;

function floorDay(date: Date): Date {
  return new Date(Math.floor(date.getTime() / DAY_MS) * DAY_MS);
}

function ceilDay(date: Date): Date {
  return new Date(Math.ceil(date.getTime() / DAY_MS) * DAY_MS);
}

function floorMonth(date: Date): Date {
  return new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1));
}

function ceilMonth(date: Date): Date {
  const floor = floorMonth(date);
  return floor.getTime() === date.getTime()
    ? floor
    : new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1));
}

export function dayString(date: Date): string {
  return date.toISOString().slice(0, 10);
}

const before = (a: Date, b: Date) => a.getTime() < b.getTime();

/** The whole-day part of [from, to) and the partial days around it. */
export function splitDays(
  from: Date | null,
  to: Date | null,
): { days: { from: Date | null; to: Date | null } | null; live: Window[] } {
  const dayFrom = from === null ? null : ceilDay(from);
  const dayTo = to === null ? null : floorDay(to);
  if (dayFrom !== null && dayTo !== null && !before(dayFrom, dayTo)) return { days: null, live: [{ from, to }] };
  const live: Window[] = [];
  if (from !== null && dayFrom !== null && before(from, dayFrom)) live.push({ from, to: dayFrom });
  if (to !== null && dayTo !== null && before(dayTo, to)) live.push({ from: dayTo, to });
  return { days: { from: dayFrom, to: dayTo }, live };
}

/** [from, to) as whole months, whole days and partial days. */
export function splitRange(from: Date | null, to: Date | null): SplitRange {
  const { days, live } = splitDays(from, to);
  if (days === null) return { months: null, days: [], live };
  const monthFrom = days.from === null ? null : ceilMonth(days.from);
  const monthTo = days.to === null ? null : floorMonth(days.to);
  const span = (a: Date | null, b: Date | null): PeriodSpan => ({
    from: a === null ? null : dayString(a),
    to: b === null ? null : dayString(b),
  });
  if (monthFrom !== null && monthTo !== null && !before(monthFrom, monthTo)) {
    return { months: null, days: [span(days.from, days.to)], live };
  }
  const daySpans: PeriodSpan[] = [];
  if (days.from !== null && monthFrom !== null && before(days.from, monthFrom))
    daySpans.push(span(days.from, monthFrom));
  if (days.to !== null && monthTo !== null && before(monthTo, days.to)) daySpans.push(span(monthTo, days.to));
  return { months: span(monthFrom, monthTo), days: daySpans, live };
}
