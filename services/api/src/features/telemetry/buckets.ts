import { z } from 'zod';
import { resolveRange, type ResolvedRange } from '../../http/query.ts';
import { assetIdFilter, bucketParam, groupByParam, range, rangeRules, searchParam, type Bucket } from './params.ts';

export const metricQuery = z.object({
  ...range,
  bucket: bucketParam,
  groupBy: groupByParam,
  assetId: assetIdFilter,
  q: searchParam.meta({
    description:
      'Case-insensitive search narrowing the assets counted (fleet sums included): asset name, identifier, display code or telemetry device id; on service-request metrics also the request title, display code and external reference',
  }),
});
export type MetricParams = z.output<typeof metricQuery>;

const BUCKET_MS: Record<Bucket, number> = { hour: 3_600_000, day: 86_400_000 };

/** from/to by the bucket's rules: hourly a day by default (≤ 93 days), daily 30 days (≤ 1100). */
export function metricRange(query: MetricParams): ResolvedRange {
  return resolveRange(query, query.bucket === 'hour' ? rangeRules.hourBuckets : rangeRules.dayBuckets);
}

/** The request widened to whole buckets, with `to` shown as the spec's lists show it. */
export function wholeBuckets(range: ResolvedRange, bucket: Bucket) {
  const width = BUCKET_MS[bucket];
  const from = new Date(Math.floor(range.from.getTime() / width) * width);
  const to = new Date(Math.ceil(range.to.getTime() / width) * width);
  const echoTo = to.getTime() === range.to.getTime() ? range.echo.to : to.toISOString();
  return { from, to, echo: { from: from.toISOString(), to: echoTo } };
}
