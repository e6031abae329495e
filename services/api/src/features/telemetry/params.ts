import { z } from 'zod';
import { limitParam, offsetParam, timeParam, type RangeRules } from '../../http/query.ts';
import { dataQualityStatuses, type DataQualityStatus } from './schemas.ts';

// Query parameters of the telemetry endpoints. Each failure message is what follows the
// parameter's name in the 400 ("invalid query parameter bucket: must be hour or day").

export const fromParam = timeParam.optional();
export const toParam = timeParam.optional();

export const assetIdFilter = z.uuid('must be a UUID').optional().meta({ description: 'Only this asset (UUID)' });

/** PostgreSQL text cannot hold NUL; such input is a 400, not a database error. */
const noNul = (value: string) => !value.includes('\u0000');

export const searchParam = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .refine(noNul, 'must not contain NUL characters')
  .optional()
  .meta({ description: 'Case-insensitive search' });

export const identifierParam = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(64, 'must be at most 64 characters')
  .refine(noNul, 'must not contain NUL characters')
  .optional()
  .meta({ description: 'Exact RFID/operator identifier' });

export const bucketParam = z
  .enum(['hour', 'day'], 'must be hour or day')
  .default('hour')
  .meta({ description: 'Bucket width: hour or day' });

export const groupByParam = z
  .enum(['fleet', 'asset'], 'must be fleet or asset')
  .default('fleet')
  .meta({ description: 'One series for the fleet (the assets the key may see) or one per asset' });

export const resolutionParam = z
  .enum(['1min', '15min'], 'must be 1min or 15min')
  .optional()
  .meta({ description: 'Position bucket width; by default 1min for ranges up to 24 hours, 15min beyond' });

export const onlineStatusParam = z
  .enum(
    ['online', 'silent', 'offline', 'unknown', 'disabled'],
    'must be one of online, silent, offline, unknown, disabled',
  )
  .optional()
  .meta({ description: 'Only devices with this online status' });

export const alertStatusParam = z
  .enum(['open', 'acknowledged'], 'must be open or acknowledged')
  .optional()
  .meta({ description: 'Only alerts with this status' });

export const booleanParam = z
  .enum(['true', 'false'], 'must be true or false')
  .transform((value) => value === 'true')
  .optional();

/**
 * `status` of the data-quality report: one or more statuses, comma-separated
 * (`offline,silent`), kept as a set.
 */
export const dataQualityStatusParam = z
  .string()
  .transform((value, ctx) => {
    const statuses = value.split(',').map((part) => part.trim());
    const known = new Set<string>(dataQualityStatuses);
    if (statuses.some((status) => !known.has(status))) {
      ctx.addIssue({
        code: 'custom',
        message: `must be one or more of ${dataQualityStatuses.join(', ')}, comma-separated`,
      });
      return z.NEVER;
    }
    return new Set(statuses as DataQualityStatus[]);
  })
  .optional()
  .meta({
    description: `Only entries with one of these statuses, comma-separated: ${dataQualityStatuses.join(', ')}`,
    example: 'offline,silent',
  });

/** limit/offset of the data-quality report: without either, the answer holds every entry. */
export const optionalPaging = {
  limit: limitParam.unwrap().optional().meta({ description: 'Page size, 1–500 (default 100 when offset is given)' }),
  offset: offsetParam.unwrap().optional().meta({ description: 'Zero-based offset of the first entry (default 0)' }),
};

/** limit/offset of JSON lists. */
export const paging = { limit: limitParam, offset: offsetParam };
/** from/to of time-bound lists. */
export const range = { from: fromParam, to: toParam };

/**
 * Default and longest range per endpoint family. Defaults end now; a longer range is a
 * 400 so no single call can ask for an unbounded scan.
 */
export const rangeRules = {
  /** Sessions, operators, geofence alerts: a week by default, up to a year. */
  sessions: { defaultDays: 7, maxDays: 366 },
  /** Hourly buckets: a day by default, up to 93 days. */
  hourBuckets: { defaultDays: 1, maxDays: 93 },
  /** Daily buckets: 30 days by default, up to 3 years. */
  dayBuckets: { defaultDays: 30, maxDays: 1100 },
  /** Position history: a day by default, up to 31 days. */
  positions: { defaultDays: 1, maxDays: 31 },
  /** Data quality: a day by default, up to 31 days. */
  dataQuality: { defaultDays: 1, maxDays: 31 },
} satisfies Record<string, RangeRules>;

export type Bucket = z.infer<typeof bucketParam>;
export type GroupBy = z.infer<typeof groupByParam>;
export type Resolution = '1min' | '15min';
