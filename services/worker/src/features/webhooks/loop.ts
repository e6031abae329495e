import { randomUUID } from 'node:crypto';
import type { Config } from '@gantry/config';
import { backoffAfterAttempt, signWebhookBody, webhookHeaders } from '@gantry/contracts';
import type { Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import type { WorkerLoop } from '../../loop.ts';
import * as metrics from './metrics.ts';
import {
  claimDueDeliveries,
  countDueDeliveries,
  recordAttempt,
  sweepOrphanedDeliveries,
  type ClaimedDelivery,
} from './repository.ts';
import { sendWebhook } from './send.ts';

export interface WebhookDeliveryDeps {
  pool: Pool;
  logger: Logger;
  config: Pick<Config, 'webhooks' | 'worker'>;
}

/** Extra lease time beyond the request timeout, for recording the outcome. */
const LEASE_MARGIN_SECONDS = 5;
/** How often the loop samples the backlog and fails deliveries of removed subscriptions. */
const HOUSEKEEPING_MS = 10_000;

const USER_AGENT = 'Gantry-Webhooks/1.0';

/**
 * Delivers webhooks (docs/webhooks.md). Each pass claims as many due deliveries as there are
 * free slots and starts them without waiting for them, so one slow receiver holds only
 * its own slots (at most concurrencyPerSubscription) and never the loop. Leases make
 * every claim durable: a killed worker's deliveries are taken over when their lease
 * runs out, with the same delivery id.
 */
export function webhookDeliveryLoop(deps: WebhookDeliveryDeps): WorkerLoop {
  const settings = deps.config.webhooks;
  const log = deps.logger.child({ loop: 'webhook-delivery' });
  const leaseSeconds = settings.timeoutSeconds + LEASE_MARGIN_SECONDS;
  const running = new Set<Promise<void>>();
  let lastHousekeeping = 0;
  let wake: (() => void) | null = null;

  const whenSlotFreesOr = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function deliver(delivery: ClaimedDelivery, leaseToken: string): Promise<void> {
    metrics.deliveryLag.observe(Math.max(0, Date.now() - delivery.dueAt.getTime()) / 1000);
    if (delivery.previousLease !== null) metrics.interruptedTotal.inc();
    const startedAt = new Date();
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      'User-Agent': USER_AGENT,
      [webhookHeaders.timestamp]: startedAt.toISOString(),
      [webhookHeaders.id]: delivery.id,
      [webhookHeaders.attempt]: String(delivery.attempt),
    };
    if (delivery.secret) headers[webhookHeaders.signature] = signWebhookBody(delivery.secret, delivery.body);

    const result = await sendWebhook(
      { url: delivery.url, body: delivery.body, headers },
      { timeoutMs: settings.timeoutSeconds * 1000, allowPrivateTargets: settings.allowPrivateTargets },
    );
    metrics.observeAttempt(result.outcome, result.durationMs);
    const recorded = await recordAttempt(deps.pool, {
      deliveryId: delivery.id,
      leaseToken,
      ok: result.ok,
      httpStatus: result.httpStatus,
      error: result.error,
      url: delivery.url,
      startedAt,
      finishedAt: new Date(startedAt.getTime() + result.durationMs),
      durationMs: result.durationMs,
      backoffSeconds: backoffAfterAttempt(settings.backoffSeconds, delivery.attempt),
    });
    if (recorded === null) {
      log.warn(
        { deliveryId: delivery.id, attempt: delivery.attempt },
        'lease lost before the attempt was recorded; another worker owns the delivery',
      );
      return;
    }
    if (recorded.status === 'delivered' || recorded.status === 'failed')
      metrics.deliveriesFinished.inc({ status: recorded.status });
    log.debug(
      {
        deliveryId: delivery.id,
        attempt: delivery.attempt,
        status: recorded.status,
        httpStatus: result.httpStatus,
        ms: result.durationMs,
      },
      'webhook attempt',
    );
  }

  function start(delivery: ClaimedDelivery, leaseToken: string): void {
    metrics.inFlight.inc();
    const task: Promise<void> = deliver(delivery, leaseToken)
      .catch((error: unknown) => {
        // The outcome could not be recorded (database unreachable): the lease runs out
        // and the delivery is attempted again, so nothing is lost.
        log.error({ err: error, deliveryId: delivery.id }, 'recording a webhook attempt failed');
      })
      .finally(() => {
        metrics.inFlight.dec();
        running.delete(task);
        wake?.();
      });
    running.add(task);
  }

  async function housekeeping(): Promise<void> {
    if (Date.now() - lastHousekeeping < HOUSEKEEPING_MS) return;
    lastHousekeeping = Date.now();
    const swept = await sweepOrphanedDeliveries(deps.pool);
    if (swept > 0) log.info({ swept }, 'failed deliveries of disabled or deleted subscriptions');
    metrics.dueBacklog.set(await countDueDeliveries(deps.pool));
  }

  return {
    name: 'webhook-delivery',
    idleMs: deps.config.worker.pollMs,
    async runOnce() {
      await housekeeping();
      const free = settings.concurrency - running.size;
      if (free <= 0) {
        await whenSlotFreesOr(deps.config.worker.pollMs);
        return 1;
      }
      const leaseToken = randomUUID();
      const claimed = await claimDueDeliveries(deps.pool, {
        limit: free,
        perSubscription: settings.concurrencyPerSubscription,
        leaseSeconds,
        leaseToken,
      });
      for (const delivery of claimed) start(delivery, leaseToken);
      if (claimed.length > 0) return claimed.length;
      // Nothing claimable now; a finishing attempt may free its subscription's slot, so
      // look again as soon as one does rather than after a full idle period.
      if (running.size > 0) {
        await whenSlotFreesOr(deps.config.worker.pollMs);
        return running.size;
      }
      return 0;
    },
    async stop() {
      // Let attempts in progress finish (each is bounded by the timeout) and record.
      await Promise.allSettled([...running]);
    },
  };
}
