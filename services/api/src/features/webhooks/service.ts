import { randomBytes } from 'node:crypto';
import type { Config } from '@gantry/config';
import { checkWebhookUrl, WEBHOOK_TEST_EVENT, webhookEventCatalog, webhookHeaders } from '@gantry/contracts';
import { withTransaction, type Pool } from '@gantry/db';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.ts';
import { resolveOptionalRange } from '../../http/query.ts';
import * as repository from './repository.ts';
import type {
  WebhookDelivery,
  WebhookDeliveryListQuery,
  WebhookSubscription,
  WebhookSubscriptionCreate,
  WebhookSubscriptionUpdate,
} from './schemas.ts';

export interface WebhookDeps {
  pool: Pool;
  config: Pick<Config, 'webhooks'>;
}

/** Subscriptions a tenant may hold; each event fans out to all of them. */
export const MAX_SUBSCRIPTIONS_PER_TENANT = 50;

/** The catalog endpoint's answer: events, delivery contract (from configuration) and payload shape. */
export function eventCatalog(config: Pick<Config, 'webhooks'>) {
  return {
    items: webhookEventCatalog.map(({ id, label, entityType }) => ({ id, label, entityType })),
    delivery: {
      method: 'POST' as const,
      contentType: 'application/json' as const,
      signatureHeader: webhookHeaders.signature,
      signatureFormat: 'sha256=<hex>',
      timestampHeader: webhookHeaders.timestamp,
      idHeader: webhookHeaders.id,
      attemptHeader: webhookHeaders.attempt,
      headers: [webhookHeaders.signature, webhookHeaders.timestamp, webhookHeaders.id, webhookHeaders.attempt],
      signatureAlgorithm: 'hmac-sha256' as const,
      signedContent: 'raw_body' as const,
      successStatusCodes: ['2xx'],
      retryStrategy: { maxAttempts: config.webhooks.maxAttempts, backoffSeconds: [...config.webhooks.backoffSeconds] },
      timeoutSeconds: config.webhooks.timeoutSeconds,
      testEvent: WEBHOOK_TEST_EVENT,
    },
    payload: {
      event: 'string',
      entityType: 'string',
      entityId: 'uuid, nullable',
      tenantId: 'uuid',
      createdAt: 'date-time, nullable',
      data: 'object',
    },
  };
}

/** A new signing secret: "whsec_" + 256 random bits. */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

async function assertAcceptableUrl(config: Pick<Config, 'webhooks'>, url: string): Promise<void> {
  const problem = await checkWebhookUrl(url, { allowPrivateTargets: config.webhooks.allowPrivateTargets });
  if (problem)
    throw new ValidationError(
      `invalid body field url: ${problem.message}`,
      problem.reason === 'private' ? 'private_webhook_target' : 'invalid_body',
    );
}

export function listSubscriptions(deps: WebhookDeps, tenantId: string): Promise<WebhookSubscription[]> {
  return repository.listSubscriptions(deps.pool, tenantId);
}

export async function getSubscription(deps: WebhookDeps, tenantId: string, id: string): Promise<WebhookSubscription> {
  const subscription = await repository.findSubscription(deps.pool, tenantId, id);
  if (!subscription) throw new NotFoundError(`no webhook subscription ${id}`);
  const { secret: _secret, ...visible } = subscription;
  return visible;
}

export async function createSubscription(deps: WebhookDeps, tenantId: string, input: WebhookSubscriptionCreate) {
  await assertAcceptableUrl(deps.config, input.url);
  const generated = input.secret === undefined ? generateSecret() : undefined;
  const secret = generated ?? input.secret ?? null;
  const name = input.name ?? new URL(input.url).host.slice(0, 200);
  return withTransaction(deps.pool, async (client) => {
    // Serialises creations per tenant so the limit holds under concurrent calls.
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhook_subscriptions:${tenantId}`]);
    if ((await repository.countSubscriptions(client, tenantId)) >= MAX_SUBSCRIPTIONS_PER_TENANT) {
      throw new ConflictError(
        `a tenant may have at most ${MAX_SUBSCRIPTIONS_PER_TENANT} webhook subscriptions`,
        'subscription_limit',
      );
    }
    const subscription = await repository.insertSubscription(client, tenantId, {
      name,
      url: input.url,
      events: input.events,
      enabled: input.enabled,
      secret,
    });
    // Only a secret the server made is shown (once): one the client chose is never echoed.
    return generated === undefined ? subscription : { ...subscription, secret: generated };
  });
}

export async function updateSubscription(
  deps: WebhookDeps,
  tenantId: string,
  id: string,
  input: WebhookSubscriptionUpdate,
) {
  if (input.url !== undefined) await assertAcceptableUrl(deps.config, input.url);
  return withTransaction(deps.pool, async (client) => {
    const current = await repository.findSubscription(client, tenantId, id, true);
    if (!current) throw new NotFoundError(`no webhook subscription ${id}`);
    const newSecret = input.rotateSecret ? generateSecret() : input.secret;
    const secret = newSecret === undefined ? current.secret : newSecret;
    const enabled = input.enabled ?? current.enabled;
    const updated = await repository.updateSubscription(client, tenantId, id, {
      name: input.name ?? current.name,
      url: input.url ?? current.url,
      events: input.events ?? current.events,
      enabled,
      secret,
    });
    if (current.enabled && !enabled) await repository.failUndeliverable(client, id, 'subscription disabled');
    // A rotated (generated) secret is shown in this answer only; a client-chosen one never.
    return input.rotateSecret ? { ...updated, secret: newSecret as string } : updated;
  });
}

export async function deleteSubscription(deps: WebhookDeps, tenantId: string, id: string) {
  return withTransaction(deps.pool, async (client) => {
    if (!(await repository.softDeleteSubscription(client, tenantId, id)))
      throw new NotFoundError(`no webhook subscription ${id}`);
    await repository.failUndeliverable(client, id, 'subscription deleted');
    return { id, deleted: true };
  });
}

/** Queues a signed test event for one subscription (delivered by the worker like any other). */
export async function sendTestEvent(deps: WebhookDeps, tenantId: string, id: string): Promise<WebhookDelivery> {
  const subscription = await repository.findSubscription(deps.pool, tenantId, id);
  if (!subscription) throw new NotFoundError(`no webhook subscription ${id}`);
  const createdAt = new Date();
  const body = JSON.stringify({
    event: WEBHOOK_TEST_EVENT,
    entityType: 'webhook_subscription',
    entityId: subscription.id,
    tenantId,
    createdAt: createdAt.toISOString(),
    data: {
      subscriptionId: subscription.id,
      name: subscription.name,
      events: subscription.events,
      message: 'Test event: your endpoint is reachable and can verify the signature.',
    },
  });
  return repository.insertDelivery(deps.pool, {
    tenantId,
    subscriptionId: subscription.id,
    url: subscription.url,
    eventType: WEBHOOK_TEST_EVENT,
    entityType: 'webhook_subscription',
    entityId: subscription.id,
    body,
    maxAttempts: deps.config.webhooks.maxAttempts,
    createdAt,
  });
}

export async function listDeliveries(deps: WebhookDeps, tenantId: string, query: WebhookDeliveryListQuery) {
  const range = resolveOptionalRange(query);
  const items = await repository.listDeliveries(deps.pool, tenantId, { ...query, from: range.from, to: range.to });
  return { items, paging: { limit: query.limit, offset: query.offset } };
}

export async function getDelivery(deps: WebhookDeps, tenantId: string, id: string) {
  const delivery = await repository.findDelivery(deps.pool, tenantId, id);
  if (!delivery) throw new NotFoundError(`no webhook delivery ${id}`);
  const { body, leased: _leased, ...visible } = delivery;
  return {
    ...visible,
    payload: JSON.parse(body) as Record<string, unknown>,
    attempts: await repository.listAttempts(deps.pool, id),
  };
}

/** Sends a delivery again with the same id and body (see scheduleRedelivery). */
export async function redeliver(deps: WebhookDeps, tenantId: string, id: string): Promise<WebhookDelivery> {
  const delivery = await repository.findDelivery(deps.pool, tenantId, id);
  if (!delivery) throw new NotFoundError(`no webhook delivery ${id}`);
  const subscription = await repository.findSubscription(deps.pool, tenantId, delivery.webhookId);
  if (!subscription) throw new ConflictError('the subscription of this delivery was deleted', 'subscription_deleted');
  if (!subscription.enabled && delivery.eventType !== WEBHOOK_TEST_EVENT) {
    throw new ConflictError('the subscription of this delivery is disabled; enable it first', 'subscription_disabled');
  }
  const scheduled = delivery.leased
    ? null
    : await repository.scheduleRedelivery(deps.pool, tenantId, id, deps.config.webhooks.maxAttempts);
  if (!scheduled)
    throw new ConflictError(
      'this delivery is being attempted right now; try again when the attempt finished',
      'delivery_in_progress',
    );
  return scheduled;
}
