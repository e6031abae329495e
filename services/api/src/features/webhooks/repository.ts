import type { Queryable } from '@gantry/db';
import { iso, isoRequired } from '../../http/common-schemas.ts';
import type { WebhookDelivery, WebhookDeliveryListQuery, WebhookSubscription } from './schemas.ts';

// SQL of webhook subscriptions and the delivery log. Every statement is bound to the
// caller's tenant; deleted subscriptions are kept (their deliveries stay in the log)
// but are invisible here.

type Row = Record<string, unknown>;

/** A masked preview: the generated prefix, if any, and the last four characters. */
export function previewSecret(secret: string | null): string {
  if (secret === null || secret === '') return '';
  const prefix = secret.startsWith('whsec_') ? 'whsec_' : '';
  return `${prefix}****${secret.slice(-4)}`;
}

export function toWebhookSubscription(row: Row): WebhookSubscription {
  const secret = (row.secret as string | null) ?? null;
  return {
    id: row.id as string,
    name: row.name as string,
    url: row.url as string,
    enabled: row.enabled as boolean,
    events: row.events as string[],
    secretSet: secret !== null && secret !== '',
    secretPreview: previewSecret(secret),
    createdAt: isoRequired(row.created_at as Date),
    updatedAt: isoRequired(row.updated_at as Date),
  };
}

const subscriptionColumns = 'id, name, url, enabled, events, secret, created_at, updated_at';

export async function listSubscriptions(db: Queryable, tenantId: string): Promise<WebhookSubscription[]> {
  const { rows } = await db.query(
    `/* api:listWebhookSubscriptions */
     SELECT ${subscriptionColumns} FROM webhook_subscriptions
      WHERE tenant_id = $1 AND deleted_at IS NULL
      ORDER BY created_at, id`,
    [tenantId],
  );
  return rows.map(toWebhookSubscription);
}

export async function findSubscription(
  db: Queryable,
  tenantId: string,
  id: string,
  forUpdate = false,
): Promise<(WebhookSubscription & { secret: string | null }) | null> {
  const { rows } = await db.query(
    `/* api:findWebhookSubscription */
     SELECT ${subscriptionColumns} FROM webhook_subscriptions
      WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL
      ${forUpdate ? 'FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  const row = rows[0];
  return row ? { ...toWebhookSubscription(row), secret: (row.secret as string | null) ?? null } : null;
}

export async function countSubscriptions(db: Queryable, tenantId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `/* api:countWebhookSubscriptions */
     SELECT count(*)::int AS n FROM webhook_subscriptions WHERE tenant_id = $1 AND deleted_at IS NULL`,
    [tenantId],
  );
  return rows[0]?.n ?? 0;
}

export async function insertSubscription(
  db: Queryable,
  tenantId: string,
  input: { name: string; url: string; events: string[]; enabled: boolean; secret: string | null },
): Promise<WebhookSubscription> {
  const { rows } = await db.query(
    `/* api:createWebhookSubscription */
     INSERT INTO webhook_subscriptions (tenant_id, name, url, events, enabled, secret)
     VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING ${subscriptionColumns}`,
    [tenantId, input.name, input.url, input.events, input.enabled, input.secret],
  );
  return toWebhookSubscription(rows[0] as Row);
}

export async function updateSubscription(
  db: Queryable,
  tenantId: string,
  id: string,
  input: { name: string; url: string; events: string[]; enabled: boolean; secret: string | null },
): Promise<WebhookSubscription> {
  const { rows } = await db.query(
    `/* api:updateWebhookSubscription */
     UPDATE webhook_subscriptions
        SET name = $3, url = $4, events = $5, enabled = $6, secret = $7, updated_at = now()
      WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL
     RETURNING ${subscriptionColumns}`,
    [tenantId, id, input.name, input.url, input.events, input.enabled, input.secret],
  );
  return toWebhookSubscription(rows[0] as Row);
}

export async function softDeleteSubscription(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `/* api:deleteWebhookSubscription */
     UPDATE webhook_subscriptions SET deleted_at = now(), enabled = false, updated_at = now()
      WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`,
    [tenantId, id],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Fails the deliveries of a subscription that can no longer go out (deleted, or
 * disabled — test events excepted). Attempts in flight finish and record themselves.
 */
export async function failUndeliverable(
  db: Queryable,
  subscriptionId: string,
  reason: 'subscription disabled' | 'subscription deleted',
): Promise<number> {
  const { rowCount } = await db.query(
    `/* api:failUndeliverableWebhookDeliveries */
     UPDATE webhook_deliveries
        SET status = 'failed', next_attempt_at = NULL, error = $2, locked_until = NULL, lease_token = NULL
      WHERE subscription_id = $1 AND status IN ('pending', 'retrying')
        AND (locked_until IS NULL OR locked_until <= now())
        AND ($2 = 'subscription deleted' OR event_id IS NOT NULL)`,
    [subscriptionId, reason],
  );
  return rowCount ?? 0;
}

// Delivery log ---------------------------------------------------------------------------

const deliveryColumns = `d.id, d.subscription_id, d.url, d.event_type, d.entity_type, d.entity_id, d.status, d.http_status,
  d.error, d.attempt_count, d.max_attempts, d.created_at, d.delivered_at, d.last_attempt_at, d.next_attempt_at`;

export function toWebhookDelivery(row: Row): WebhookDelivery {
  return {
    id: row.id as string,
    webhookId: row.subscription_id as string,
    url: row.url as string,
    eventType: row.event_type as string,
    entityType: row.entity_type as string,
    status: row.status as WebhookDelivery['status'],
    error: row.error as string,
    entityId: (row.entity_id as string | null) ?? null,
    httpStatus: (row.http_status as number | null) ?? null,
    attemptCount: row.attempt_count as number,
    maxAttempts: row.max_attempts as number,
    createdAt: iso(row.created_at as Date),
    deliveredAt: iso(row.delivered_at as Date | null),
    lastAttemptAt: iso(row.last_attempt_at as Date | null),
    nextAttemptAt: iso(row.next_attempt_at as Date | null),
  };
}

export async function listDeliveries(
  db: Queryable,
  tenantId: string,
  filter: Omit<WebhookDeliveryListQuery, 'from' | 'to'> & { from: Date | null; to: Date | null },
): Promise<WebhookDelivery[]> {
  const { rows } = await db.query(
    `/* api:listWebhookDeliveries */
     SELECT ${deliveryColumns}
       FROM webhook_deliveries d
      WHERE d.tenant_id = $1
        AND ($2::uuid IS NULL OR d.subscription_id = $2)
        AND ($3::text IS NULL OR d.event_type = $3)
        AND ($4::text IS NULL OR d.status = $4)
        AND ($5::uuid IS NULL OR d.entity_id = $5)
        AND ($6::timestamptz IS NULL OR d.created_at >= $6)
        AND ($7::timestamptz IS NULL OR d.created_at < $7)
      ORDER BY d.created_at DESC, d.id DESC
      LIMIT $8 OFFSET $9`,
    [
      tenantId,
      filter.webhookId ?? null,
      filter.eventType ?? null,
      filter.status ?? null,
      filter.entityId ?? null,
      filter.from,
      filter.to,
      filter.limit,
      filter.offset,
    ],
  );
  return rows.map(toWebhookDelivery);
}

export async function findDelivery(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<(WebhookDelivery & { body: string; leased: boolean }) | null> {
  const { rows } = await db.query(
    `/* api:findWebhookDelivery */
     SELECT ${deliveryColumns}, d.body, coalesce(d.locked_until > now(), false) AS leased
       FROM webhook_deliveries d
      WHERE d.tenant_id = $1 AND d.id = $2`,
    [tenantId, id],
  );
  const row = rows[0];
  return row ? { ...toWebhookDelivery(row), body: row.body as string, leased: row.leased as boolean } : null;
}

export async function listAttempts(db: Queryable, deliveryId: string) {
  const { rows } = await db.query(
    `/* api:listWebhookDeliveryAttempts */
     SELECT attempt, started_at, duration_ms, http_status, error
       FROM webhook_delivery_attempts WHERE delivery_id = $1 ORDER BY id`,
    [deliveryId],
  );
  return rows.map((row: Row) => ({
    attempt: row.attempt as number,
    startedAt: isoRequired(row.started_at as Date),
    durationMs: (row.duration_ms as number | null) ?? null,
    httpStatus: (row.http_status as number | null) ?? null,
    error: row.error as string,
  }));
}

/** Inserts a one-off delivery (the test event) for a subscription. */
export async function insertDelivery(
  db: Queryable,
  input: {
    tenantId: string;
    subscriptionId: string;
    url: string;
    eventType: string;
    entityType: string;
    entityId: string | null;
    body: string;
    maxAttempts: number;
    createdAt: Date;
  },
): Promise<WebhookDelivery> {
  const { rows } = await db.query(
    `/* api:createTestWebhookDelivery */
     INSERT INTO webhook_deliveries AS d
       (tenant_id, subscription_id, url, event_type, entity_type, entity_id, body, max_attempts, next_attempt_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
     RETURNING ${deliveryColumns}`,
    [
      input.tenantId,
      input.subscriptionId,
      input.url,
      input.eventType,
      input.entityType,
      input.entityId,
      input.body,
      input.maxAttempts,
      input.createdAt,
    ],
  );
  return toWebhookDelivery(rows[0] as Row);
}

/**
 * Schedules a delivery again, now, keeping its id and body. A delivery that had
 * finished (delivered or failed) gets a fresh budget of attempts; numbering continues.
 * Returns null when it is in flight right now.
 */
export async function scheduleRedelivery(
  db: Queryable,
  tenantId: string,
  id: string,
  maxAttempts: number,
): Promise<WebhookDelivery | null> {
  const { rows } = await db.query(
    `/* api:redeliverWebhookDelivery */
     UPDATE webhook_deliveries d
        SET status = CASE WHEN d.status IN ('delivered', 'failed') THEN 'pending' ELSE d.status END,
            max_attempts = CASE WHEN d.status IN ('delivered', 'failed') THEN d.attempt_count + $3 ELSE d.max_attempts END,
            next_attempt_at = now(),
            delivered_at = NULL
      WHERE d.tenant_id = $1 AND d.id = $2 AND (d.locked_until IS NULL OR d.locked_until <= now())
     RETURNING ${deliveryColumns}`,
    [tenantId, id, maxAttempts],
  );
  const row = rows[0];
  return row ? toWebhookDelivery(row) : null;
}
