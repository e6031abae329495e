import { Counter, Gauge, Histogram, register } from 'prom-client';
import type { BronzeStatus, MessageOutcome } from './storage/write-batch.ts';

/**
 * Ingest metrics in prom-client's global registry (served at /metrics by the API in the
 * all-in-one, and by the standalone ingest's own small HTTP server). Created once per
 * process, however many ingest instances a test starts.
 */
function once<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}

/**
 * Per-message figures are kept in plain variables and handed to prom-client when it
 * collects (a scrape, a test's get()): a labelled inc() or set() per message hashed its
 * labels every time, a measurable share of ingest's CPU at tens of thousands of messages
 * per second.
 */
const receivedByType = new Map<string, number>();
let unackedNow = 0;

/** Counts a received message (gantry_ingest_messages_received_total). */
export function noteReceivedMessage(type: string): void {
  receivedByType.set(type, (receivedByType.get(type) ?? 0) + 1);
}

/** The number of messages received and not yet acknowledged (gantry_ingest_unacknowledged_messages). */
export function noteUnacknowledged(count: number): void {
  unackedNow = count;
}

export const ingestMetrics = {
  received: once(
    'gantry_ingest_messages_received_total',
    () =>
      new Counter({
        name: 'gantry_ingest_messages_received_total',
        help: 'MQTT messages received by ingest',
        labelNames: ['type'],
        collect() {
          for (const [type, count] of receivedByType) this.inc({ type }, count);
          receivedByType.clear();
        },
      }),
  ),
  redelivered: once(
    'gantry_ingest_messages_redelivered_total',
    () =>
      new Counter({
        name: 'gantry_ingest_messages_redelivered_total',
        help: 'Messages the broker sent again (DUP flag): earlier ones were not acknowledged',
      }),
  ),
  stored: once(
    'gantry_ingest_messages_stored_total',
    () =>
      new Counter({
        name: 'gantry_ingest_messages_stored_total',
        help: 'Messages committed to bronze, by status (accepted, partial, duplicate, rejected)',
        labelNames: ['status'],
      }),
  ),
  rejected: once(
    'gantry_ingest_messages_rejected_total',
    () =>
      new Counter({
        name: 'gantry_ingest_messages_rejected_total',
        help: 'Messages (or batch entries) rejected, by reason',
        labelNames: ['reason'],
      }),
  ),
  readings: once(
    'gantry_ingest_readings_stored_total',
    () => new Counter({ name: 'gantry_ingest_readings_stored_total', help: 'New readings committed to silver' }),
  ),
  batchSize: once(
    'gantry_ingest_batch_messages',
    () =>
      new Histogram({
        name: 'gantry_ingest_batch_messages',
        help: 'Messages per committed batch',
        buckets: [1, 10, 50, 100, 250, 500, 1000, 2000, 5000, 10000],
      }),
  ),
  commitSeconds: once(
    'gantry_ingest_commit_seconds',
    () =>
      new Histogram({
        name: 'gantry_ingest_commit_seconds',
        help: 'Time to write and commit one batch (successful attempt)',
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      }),
  ),
  lagSeconds: once(
    'gantry_ingest_lag_seconds',
    () =>
      new Histogram({
        name: 'gantry_ingest_lag_seconds',
        help: 'End-to-end lag: receive time minus device time, per stored message',
        buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86400],
      }),
  ),
  commitRetries: once(
    'gantry_ingest_commit_retries_total',
    () =>
      new Counter({
        name: 'gantry_ingest_commit_retries_total',
        help: 'Batch commits retried after a database failure',
      }),
  ),
  inFlight: once(
    'gantry_ingest_unacknowledged_messages',
    () =>
      new Gauge({
        name: 'gantry_ingest_unacknowledged_messages',
        help: 'Messages received and not yet acknowledged to the broker',
        collect() {
          this.set(unackedNow);
        },
      }),
  ),
  connected: once(
    'gantry_ingest_mqtt_connected',
    () => new Gauge({ name: 'gantry_ingest_mqtt_connected', help: '1 while the ingest MQTT connection is up' }),
  ),
};

/** Counts the committed outcomes of one batch. */
export function recordOutcomes(
  outcomes: MessageOutcome[],
  deviceTimes: Array<number | null>,
  receivedAt: number[],
): void {
  const byStatus: Record<BronzeStatus, number> = { accepted: 0, rejected: 0, duplicate: 0, partial: 0 };
  const byReason = new Map<string, number>();
  let readings = 0;
  outcomes.forEach((outcome, index) => {
    byStatus[outcome.status] += 1;
    readings += outcome.storedReadings;
    if (outcome.reason) byReason.set(outcome.reason, (byReason.get(outcome.reason) ?? 0) + 1);
    const ts = deviceTimes[index];
    if (ts !== null && ts !== undefined && outcome.status !== 'rejected') {
      ingestMetrics.lagSeconds.observe(Math.max(0, (receivedAt[index]! - ts) / 1000));
    }
  });
  for (const [status, count] of Object.entries(byStatus)) if (count > 0) ingestMetrics.stored.inc({ status }, count);
  for (const [reason, count] of byReason) ingestMetrics.rejected.inc({ reason }, count);
  if (readings > 0) ingestMetrics.readings.inc(readings);
  ingestMetrics.batchSize.observe(outcomes.length);
}
