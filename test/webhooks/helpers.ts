import type { Config } from '@gantry/config';
import { createOutbox, withTransaction, type Pool } from '@gantry/db';
import { webhookEventCatalog, type WebhookEventType } from '@gantry/contracts';
import { silentLogger } from '@gantry/logger';
import { runLoop } from '../../services/worker/src/loop.ts';
import { webhookDeliveryLoop } from '../../services/worker/src/features/webhooks/loop.ts';

/** Settings that keep delivery tests quick: 1 s backoff, 2 s timeout, fast polling. */
export const fastWebhookEnv = {
  GANTRY_WEBHOOK_BACKOFF_SECONDS: '1,1',
  GANTRY_WEBHOOK_TIMEOUT_SECONDS: '2',
  GANTRY_WORKER_POLL_MS: '50',
};

/** The worker's delivery loop in this process (the real loop and runner, nothing else). */
export function startDeliveryLoop(pool: Pool, config: Config) {
  return runLoop(webhookDeliveryLoop({ pool, config, logger: silentLogger() }), silentLogger());
}

/** Writes an event to the outbox in its own transaction, as a producer does. */
export async function produceEvent(
  pool: Pool,
  tenantId: string,
  event: WebhookEventType,
  data: Record<string, unknown>,
  entityId: string | null = null,
  maxAttempts = 3,
) {
  const entityType = webhookEventCatalog.find((entry) => entry.id === event)!.entityType;
  return withTransaction(pool, (client) =>
    createOutbox({ maxAttempts }).enqueue(client, { tenantId, event, entityType, entityId, customerName: null, data }),
  );
}

export interface DeliveryRow {
  id: string;
  status: string;
  attempt_count: number;
  http_status: number | null;
  error: string;
  subscription_id: string;
  event_id: string | null;
}

/** Polls the delivery log until predicate holds (a wait with a bound, not a timed assertion). */
export async function waitForDeliveries(
  pool: Pool,
  what: string,
  predicate: (rows: DeliveryRow[]) => boolean,
  waitMs = 30_000,
): Promise<DeliveryRow[]> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const { rows } = await pool.query<DeliveryRow>(
      'SELECT id, status, attempt_count, http_status, error, subscription_id, event_id FROM webhook_deliveries ORDER BY created_at, id',
    );
    if (predicate(rows)) return rows;
    if (Date.now() > deadline)
      throw new Error(
        `still waiting for ${what} after ${waitMs} ms: ${JSON.stringify(rows.map((r) => [r.status, r.attempt_count]))}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
