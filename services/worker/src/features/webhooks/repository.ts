import type { Queryable } from '@gantry/db';

// SQL of webhook delivery. A claim is a lease (locked_until + lease_token) taken in one
// short statement; the HTTP attempt runs outside any transaction, and its outcome is
// written only while the lease token still matches.

export interface ClaimedDelivery {
  id: string;
  tenantId: string;
  subscriptionId: string;
  /** The subscription's current URL and secret: a fix or a rotation applies to the next attempt. */
  url: string;
  secret: string | null;
  body: string;
  /** 1-based number of the attempt about to be made. */
  attempt: number;
  maxAttempts: number;
  dueAt: Date;
  /** When the previous holder's lease ran out mid-attempt (it was killed or stalled); null otherwise. */
  previousLease: Date | null;
}

type Row = Record<string, unknown>;

function toClaimedDelivery(row: Row): ClaimedDelivery {
  return {
    id: row.id as string,
    tenantId: row.tenant_id as string,
    subscriptionId: row.subscription_id as string,
    url: row.url as string,
    secret: (row.secret as string | null) ?? null,
    body: row.body as string,
    attempt: (row.attempt_count as number) + 1,
    maxAttempts: row.max_attempts as number,
    dueAt: row.next_attempt_at as Date,
    previousLease: (row.previous_lease as Date | null) ?? null,
  };
}

export interface ClaimOptions {
  limit: number;
  /** Most in-flight deliveries one subscription may hold across workers. */
  perSubscription: number;
  leaseSeconds: number;
  leaseToken: string;
}

/**
 * Claims up to `limit` due deliveries, at most `perSubscription` in flight per
 * subscription, oldest due first within each subscription. Walking subscriptions
 * (rather than the global due queue) is what keeps a backlog or a hanging receiver of
 * one subscription from starving the others. Deliveries of disabled subscriptions stay
 * unclaimed except test events; sweepOrphanedDeliveries fails them.
 */
export async function claimDueDeliveries(db: Queryable, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  const { rows } = await db.query(
    `/* worker:claimWebhookDeliveries */
     WITH leased AS (
       SELECT subscription_id, count(*)::int AS n
         FROM webhook_deliveries
        WHERE locked_until > now()
        GROUP BY subscription_id
     ), picked AS (
       SELECT due.id, due.previous_lease, due.next_attempt_at
         FROM webhook_subscriptions s
         LEFT JOIN leased l ON l.subscription_id = s.id
         CROSS JOIN LATERAL (
           SELECT d.id, d.next_attempt_at, d.locked_until AS previous_lease
             FROM webhook_deliveries d
            WHERE d.subscription_id = s.id
              AND d.status IN ('pending', 'retrying')
              AND d.next_attempt_at <= now()
              AND (d.locked_until IS NULL OR d.locked_until <= now())
              AND (s.enabled OR d.event_id IS NULL)
            ORDER BY d.next_attempt_at, d.id
            LIMIT greatest($2::int - coalesce(l.n, 0), 0)
            FOR UPDATE OF d SKIP LOCKED
         ) due
        WHERE s.deleted_at IS NULL
        ORDER BY due.next_attempt_at, due.id
        LIMIT $1
     )
     UPDATE webhook_deliveries d
        SET locked_until = now() + make_interval(secs => $3), lease_token = $4
       FROM picked, webhook_subscriptions s
      WHERE d.id = picked.id AND s.id = d.subscription_id
     RETURNING d.id, d.tenant_id, d.subscription_id, s.url, s.secret, d.body, d.attempt_count, d.max_attempts,
               picked.next_attempt_at, picked.previous_lease`,
    [options.limit, options.perSubscription, options.leaseSeconds, options.leaseToken],
  );
  const claimed = rows.map(toClaimedDelivery);
  const recovered = claimed.filter((delivery) => delivery.previousLease !== null);
  if (recovered.length > 0) {
    // The interrupted attempt may or may not have reached the receiver; it is logged and
    // made again with the same attempt number and delivery id (receivers de-duplicate).
    // It started when its lease was taken: lease end minus the lease length.
    await db.query(
      `/* worker:logInterruptedWebhookAttempts */
       INSERT INTO webhook_delivery_attempts (delivery_id, attempt, started_at, error)
       SELECT id, attempt, lease_end - make_interval(secs => $4), 'interrupted: the worker stopped during this attempt; it is made again'
         FROM unnest($1::uuid[], $2::int[], $3::timestamptz[]) AS t (id, attempt, lease_end)`,
      [
        recovered.map((delivery) => delivery.id),
        recovered.map((delivery) => delivery.attempt),
        recovered.map((delivery) => delivery.previousLease),
        options.leaseSeconds,
      ],
    );
  }
  return claimed;
}

export interface AttemptRecord {
  deliveryId: string;
  leaseToken: string;
  ok: boolean;
  httpStatus: number | null;
  error: string;
  url: string;
  startedAt: Date;
  finishedAt: Date;
  durationMs: number;
  /** Seconds until the next attempt should this one not be the last. */
  backoffSeconds: number;
}

export type DeliveryStatus = 'pending' | 'retrying' | 'delivered' | 'failed';

/**
 * Writes an attempt's outcome and the delivery's new status in one statement. Returns
 * null when the lease was lost (another worker took the delivery over), in which case
 * nothing is written.
 */
export async function recordAttempt(
  db: Queryable,
  record: AttemptRecord,
): Promise<{ status: DeliveryStatus; attemptCount: number } | null> {
  const { rows } = await db.query<{ status: DeliveryStatus; attempt_count: number }>(
    `/* worker:recordWebhookAttempt */
     WITH current AS (
       SELECT d.id, d.attempt_count + 1 AS attempt,
              CASE WHEN $3::boolean THEN 'delivered'
                   WHEN d.attempt_count + 1 >= d.max_attempts OR s.deleted_at IS NOT NULL
                        OR (NOT s.enabled AND d.event_id IS NOT NULL) THEN 'failed'
                   ELSE 'retrying' END AS status
         FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
        WHERE d.id = $1 AND d.lease_token = $2
          FOR UPDATE OF d
     ), updated AS (
       UPDATE webhook_deliveries d
          SET status = c.status, attempt_count = c.attempt, http_status = $4, error = $5, url = $6,
              last_attempt_at = $7,
              delivered_at = CASE WHEN c.status = 'delivered' THEN $8::timestamptz END,
              next_attempt_at = CASE WHEN c.status = 'retrying' THEN $8::timestamptz + make_interval(secs => $10) END,
              locked_until = NULL, lease_token = NULL
         FROM current c
        WHERE d.id = c.id
       RETURNING d.id, d.status, d.attempt_count
     ), logged AS (
       INSERT INTO webhook_delivery_attempts (delivery_id, attempt, started_at, duration_ms, http_status, error)
       SELECT id, attempt_count, $7, $9, $4, $5 FROM updated
     )
     SELECT status, attempt_count FROM updated`,
    [
      record.deliveryId,
      record.leaseToken,
      record.ok,
      record.httpStatus,
      record.error,
      record.url,
      record.startedAt,
      record.finishedAt,
      record.durationMs,
      record.backoffSeconds,
    ],
  );
  const row = rows[0];
  return row ? { status: row.status, attemptCount: row.attempt_count } : null;
}

/**
 * Fails deliveries that can no longer go out: their subscription was deleted, or
 * disabled (test events excepted). The API does this when a subscription changes; this
 * catches events a producer committed at the same moment.
 */
export async function sweepOrphanedDeliveries(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    `/* worker:sweepOrphanedWebhookDeliveries */
     UPDATE webhook_deliveries d
        SET status = 'failed', next_attempt_at = NULL, locked_until = NULL, lease_token = NULL,
            error = CASE WHEN s.deleted_at IS NOT NULL THEN 'subscription deleted' ELSE 'subscription disabled' END
       FROM webhook_subscriptions s
      WHERE s.id = d.subscription_id
        AND d.status IN ('pending', 'retrying')
        AND (d.locked_until IS NULL OR d.locked_until <= now())
        AND (s.deleted_at IS NOT NULL OR (NOT s.enabled AND d.event_id IS NOT NULL))`,
  );
  return rowCount ?? 0;
}

/** Deliveries due now and not claimed (the backlog gauge). */
export async function countDueDeliveries(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `/* worker:countDueWebhookDeliveries */
     SELECT count(*)::int AS n FROM webhook_deliveries
      WHERE status IN ('pending', 'retrying') AND next_attempt_at <= now()
        AND (locked_until IS NULL OR locked_until <= now())`,
  );
  return rows[0]?.n ?? 0;
}
