import type { WebhookEventType } from '@gantry/contracts';
import type { Queryable } from './pool.ts';

export interface OutboxEvent {
  tenantId: string;
  event: WebhookEventType;
  entityType: string;
  entityId: string | null;
  /** The customer the entity belongs to, if any (kept for scoping and audits). */
  customerName: string | null;
  data: Record<string, unknown>;
}

export interface Outbox {
  /**
   * Records the event and one pending delivery per enabled subscription of the tenant
   * that wants it. Call it with the client of the transaction making the change, so
   * the event exists exactly when the change does.
   */
  enqueue(client: Queryable, event: OutboxEvent): Promise<{ eventId: string; deliveries: number }>;
}

export function createOutbox(options: { maxAttempts: number }): Outbox {
  return {
    async enqueue(client, event) {
      const createdAt = new Date();
      // The body is fixed here: every attempt sends (and signs) these exact bytes.
      const body = JSON.stringify({
        event: event.event,
        entityType: event.entityType,
        entityId: event.entityId,
        tenantId: event.tenantId,
        createdAt: createdAt.toISOString(),
        data: event.data,
      });
      const { rows } = await client.query<{ event_id: string; deliveries: number }>(
        `/* outbox:enqueue */
         WITH event AS (
           INSERT INTO webhook_events (tenant_id, event_type, entity_type, entity_id, customer_name, data, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           RETURNING id
         ), deliveries AS (
           INSERT INTO webhook_deliveries
             (tenant_id, event_id, subscription_id, url, event_type, entity_type, entity_id, body, max_attempts, next_attempt_at, created_at)
           SELECT $1, event.id, s.id, s.url, $2, $3, $4, $8, $9, $7, $7
             FROM event, webhook_subscriptions s
            WHERE s.tenant_id = $1 AND s.enabled AND s.deleted_at IS NULL AND $2 = ANY (s.events)
           RETURNING 1
         )
         SELECT (SELECT id FROM event) AS event_id, (SELECT count(*)::int FROM deliveries) AS deliveries`,
        [
          event.tenantId,
          event.event,
          event.entityType,
          event.entityId,
          event.customerName,
          JSON.stringify(event.data),
          createdAt,
          body,
          options.maxAttempts,
        ],
      );
      const row = rows[0];
      if (!row) throw new Error('outbox insert returned no row');
      return { eventId: row.event_id, deliveries: row.deliveries };
    },
  };
}
