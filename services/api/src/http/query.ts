import { z } from 'zod';
import { ValidationError } from '../errors.ts';

// Query-string building blocks. Query values arrive as strings, so numbers are coerced
// and every failure names its parameter (see describeIssues).

export const limitParam = z.coerce
  .number({ error: 'must be an integer between 1 and 500' })
  .int('must be an integer between 1 and 500')
  .min(1, 'must be an integer between 1 and 500')
  .max(500, 'must be an integer between 1 and 500')
  .default(100)
  .meta({ description: 'Page size, 1–500', example: 100 });

export const offsetParam = z.coerce
  .number({ error: 'must be an integer ≥ 0' })
  .int('must be an integer ≥ 0')
  .min(0, 'must be an integer ≥ 0')
  .max(1_000_000_000, 'is too large')
  .default(0)
  .meta({ description: 'Zero-based offset of the first row', example: 0 });

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

const TIME_VALUE_RULE = 'must be YYYY-MM-DD or an RFC 3339 timestamp, in the years 1970 to 2999';

/**
 * The shape of a time value for the document (`pattern`): a date, or a date and time
 * with seconds and a zone. parseTimeValue then checks the calendar and the year range.
 */
export const TIME_VALUE_PATTERN = /^\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2}))?$/;

export const timeParam = z
  .string()
  .max(40, TIME_VALUE_RULE)
  .regex(TIME_VALUE_PATTERN, TIME_VALUE_RULE)
  .refine((value) => parseTimeValue(value) !== null, TIME_VALUE_RULE)
  .meta({ description: 'YYYY-MM-DD (whole UTC day) or RFC 3339 timestamp', example: '2026-11-01' });

export const uuidParam = (name: string) => z.uuid(`must be a UUID`).meta({ description: `${name} (UUID)` });

interface ParsedTime {
  instant: Date;
  dateOnly: boolean;
}

function validCalendarDate(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/**
 * Parses YYYY-MM-DD (as the start of that UTC day) or an RFC 3339 timestamp. Years
 * outside 1970–2999 are refused: no data lies there, and date arithmetic near the ends
 * of PostgreSQL's range would overflow.
 */
export function parseTimeValue(value: string): ParsedTime | null {
  const dateOnly = DATE_ONLY.exec(value);
  if (dateOnly) {
    const [year, month, day] = [Number(dateOnly[1]), Number(dateOnly[2]), Number(dateOnly[3])];
    if (!validCalendarDate(year, month, day) || year < 1970 || year > 2999) return null;
    return { instant: new Date(Date.UTC(year, month - 1, day)), dateOnly: true };
  }
  const full = RFC3339.exec(value);
  if (!full) return null;
  const [year, month, day, hour, minute, second] = full.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!validCalendarDate(year, month, day) || hour > 23 || minute > 59 || second > 60) return null;
  const instant = new Date(value.replace(' ', 'T'));
  if (Number.isNaN(instant.getTime()) || year < 1970 || year > 2999) return null;
  return { instant, dateOnly: false };
}

/**
 * A resolved time range. `from` is inclusive and `to` exclusive; `echo` is what the
 * response's `range` shows: a date-only `to` includes the whole day, so it is shown as
 * that day's last millisecond.
 */
export interface ResolvedRange {
  from: Date;
  to: Date;
  echo: { from: string; to: string };
}

export interface RangeRules {
  /** Length of the default range ending now, when `from` is absent. */
  defaultDays: number;
  /** Longest range accepted; longer → 400. */
  maxDays: number;
  now?: Date;
}

const DAY_MS = 86_400_000;

/** Resolves `from`/`to` with the spec's rules (date-only from = day start, date-only to = whole day). */
export function resolveRange(
  query: { from?: string | undefined; to?: string | undefined },
  rules: RangeRules,
): ResolvedRange {
  const now = rules.now ?? new Date();
  const fromParsed = query.from === undefined ? null : parseTimeValue(query.from);
  const toParsed = query.to === undefined ? null : parseTimeValue(query.to);
  if (query.from !== undefined && fromParsed === null)
    throw new ValidationError(`invalid query parameter from: ${TIME_VALUE_RULE}`, 'invalid_parameter');
  if (query.to !== undefined && toParsed === null)
    throw new ValidationError(`invalid query parameter to: ${TIME_VALUE_RULE}`, 'invalid_parameter');

  const to =
    toParsed === null ? now : toParsed.dateOnly ? new Date(toParsed.instant.getTime() + DAY_MS) : toParsed.instant;
  const from = fromParsed === null ? new Date(to.getTime() - rules.defaultDays * DAY_MS) : fromParsed.instant;
  if (from.getTime() >= to.getTime()) {
    throw new ValidationError('invalid range: from must be before to', 'invalid_range');
  }
  if (to.getTime() - from.getTime() > rules.maxDays * DAY_MS) {
    throw new ValidationError(`invalid range: at most ${rules.maxDays} days between from and to`, 'invalid_range');
  }
  const shownTo = toParsed?.dateOnly ? new Date(to.getTime() - 1) : to;
  return { from, to, echo: { from: from.toISOString(), to: shownTo.toISOString() } };
}

/** As resolveRange, for endpoints where an absent bound means "unbounded". */
export function resolveOptionalRange(query: { from?: string | undefined; to?: string | undefined }): {
  from: Date | null;
  to: Date | null;
  echo: { from: string | null; to: string | null };
} {
  if (query.from === undefined && query.to === undefined)
    return { from: null, to: null, echo: { from: null, to: null } };
  const fromParsed = query.from === undefined ? null : parseTimeValue(query.from);
  const toParsed = query.to === undefined ? null : parseTimeValue(query.to);
  if (query.from !== undefined && fromParsed === null)
    throw new ValidationError(`invalid query parameter from: ${TIME_VALUE_RULE}`, 'invalid_parameter');
  if (query.to !== undefined && toParsed === null)
    throw new ValidationError(`invalid query parameter to: ${TIME_VALUE_RULE}`, 'invalid_parameter');
  const from = fromParsed?.instant ?? null;
  const to =
    toParsed === null ? null : toParsed.dateOnly ? new Date(toParsed.instant.getTime() + DAY_MS) : toParsed.instant;
  if (from && to && from.getTime() >= to.getTime())
    throw new ValidationError('invalid range: from must be before to', 'invalid_range');
  const shownTo = to && toParsed?.dateOnly ? new Date(to.getTime() - 1) : to;
  return { from, to, echo: { from: from?.toISOString() ?? null, to: shownTo?.toISOString() ?? null } };
}
