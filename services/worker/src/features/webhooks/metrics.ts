import { Counter, Gauge, Histogram, register } from 'prom-client';
import type { AttemptOutcome } from './send.ts';

// Webhook delivery metrics on the process-wide prom-client registry (served by the
// API's /metrics in the all-in-one process). Looked up before being created so a
// second worker in the same process (tests) reuses them.

function metric<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}

export const attemptsTotal = metric(
  'gantry_webhook_delivery_attempts_total',
  () =>
    new Counter<'outcome'>({
      name: 'gantry_webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by outcome (success, http_error, timeout, network_error, refused_target)',
      labelNames: ['outcome'],
    }),
);

export const attemptDuration = metric(
  'gantry_webhook_delivery_attempt_duration_seconds',
  () =>
    new Histogram<'outcome'>({
      name: 'gantry_webhook_delivery_attempt_duration_seconds',
      help: 'Duration of one webhook delivery attempt, request sent to response status',
      labelNames: ['outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    }),
);

export const deliveriesFinished = metric(
  'gantry_webhook_deliveries_finished_total',
  () =>
    new Counter<'status'>({
      name: 'gantry_webhook_deliveries_finished_total',
      help: 'Webhook deliveries that reached a final status (delivered or failed)',
      labelNames: ['status'],
    }),
);

export const deliveryLag = metric(
  'gantry_webhook_delivery_lag_seconds',
  () =>
    new Histogram({
      name: 'gantry_webhook_delivery_lag_seconds',
      help: 'Time from a delivery becoming due to its attempt starting (queueing delay)',
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    }),
);

export const inFlight = metric(
  'gantry_webhook_deliveries_in_flight',
  () =>
    new Gauge({
      name: 'gantry_webhook_deliveries_in_flight',
      help: 'Webhook delivery attempts in progress in this process',
    }),
);

export const interruptedTotal = metric(
  'gantry_webhook_delivery_leases_recovered_total',
  () =>
    new Counter({
      name: 'gantry_webhook_delivery_leases_recovered_total',
      help: 'Deliveries taken over after the worker holding them stopped mid-attempt',
    }),
);

export function observeAttempt(outcome: AttemptOutcome, durationMs: number): void {
  attemptsTotal.inc({ outcome });
  attemptDuration.observe({ outcome }, durationMs / 1000);
}

export const dueBacklog = metric(
  'gantry_webhook_deliveries_due',
  () =>
    new Gauge({
      name: 'gantry_webhook_deliveries_due',
      help: 'Deliveries due now and not yet claimed, across all workers (sampled by the delivery loop)',
    }),
);
