/** One row of the soak's table: a sampling window. */
export interface Row {
  /** Seconds since the soak started, at the end of the window. */
  t: number;
  pubRate: number;
  commitRate: number;
  /** Published and not yet committed (broker queue + inside ingest). */
  backlog: number;
  redelivered: number;
  /** Largest end-to-end lag probed in the window (device time → committed), s. */
  freshnessMax: number;
  /** Upper bound of the histogram bucket holding the window's p95 of received − device time, s. */
  receiveLagP95: number;
  /** Upper bound of the bucket holding the window's p95 of ingest's batch write + commit time, s. */
  commitP95: number;
  derivationLagMax: number;
  queued: number;
  goldBacklog: number;
  apiRate: number;
  apiP95: number;
  apiNon2xx: number;
  apiFailures: number;
  api5xx: number;
  errorLines: number;
  rssMiB: [number, number, number];
  busy: number;
  load: number;
}

const fmt = (value: number, digits = 0) =>
  Number.isFinite(value)
    ? value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : value === Infinity
      ? '∞'
      : '—';

const columns: Array<[string, number, (row: Row) => string]> = [
  ['time', 6, (row) => `${Math.floor(Math.round(row.t) / 60)}:${String(Math.round(row.t) % 60).padStart(2, '0')}`],
  ['pub/s', 6, (row) => fmt(row.pubRate)],
  ['commit/s', 8, (row) => fmt(row.commitRate)],
  ['backlog', 8, (row) => fmt(row.backlog)],
  ['redeliv', 7, (row) => fmt(row.redelivered)],
  ['e2e lag max s', 13, (row) => fmt(row.freshnessMax, 2)],
  ['recv lag p95 ≤ s', 16, (row) => fmt(row.receiveLagP95, 2)],
  ['commit p95 ≤ s', 14, (row) => fmt(row.commitP95, 2)],
  ['deriv lag max s', 15, (row) => fmt(row.derivationLagMax, 1)],
  ['queue', 5, (row) => fmt(row.queued)],
  ['gold inval', 10, (row) => fmt(row.goldBacklog)],
  ['api req/s', 9, (row) => fmt(row.apiRate, 1)],
  ['api p95 ms', 10, (row) => fmt(row.apiP95)],
  ['non-2xx/fail', 12, (row) => `${fmt(row.apiNon2xx)}/${fmt(row.apiFailures)}`],
  ['5xx', 3, (row) => fmt(row.api5xx)],
  ['err lines', 9, (row) => fmt(row.errorLines)],
  ['RSS MiB api/ingest/worker', 25, (row) => row.rssMiB.map((value) => fmt(value)).join('/')],
  ['box cpu', 7, (row) => `${fmt(row.busy)}%`],
  ['load', 5, (row) => fmt(row.load, 1)],
];

export const tableHeader = columns.map(([title, width]) => title.padStart(width)).join('  ');

export function formatRow(row: Row): string {
  return columns.map(([, width, cell]) => cell(row).padStart(width)).join('  ');
}
