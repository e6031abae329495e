import { z } from 'zod';
import { WEBHOOK_TEST_EVENT, webhookEventTypes } from '@gantry/contracts';
import { dateTime, nullableDateTime, Paging } from '../../http/common-schemas.ts';
import { limitParam, offsetParam, timeParam } from '../../http/query.ts';

// The spec's Webhooks and Events parts: the catalog with its delivery contract,
// subscriptions, and the delivery log.

export const WebhookEvent = z
  .object({
    id: z.string().meta({ description: 'Event name', example: 'service_request.created' }),
    label: z.string().meta({ description: 'Human label', example: 'Service request created' }),
    entityType: z
      .string()
      .meta({ description: 'entityType of the payloads of this event', example: 'service_request' }),
  })
  .meta({ id: 'WebhookEvent' });

export const WebhookDeliveryContract = z
  .object({
    method: z.literal('POST'),
    contentType: z.literal('application/json'),
    signatureHeader: z.string().meta({ example: 'X-Service-Signature' }),
    signatureFormat: z.string().meta({ description: 'Value of the signature header', example: 'sha256=<hex>' }),
    timestampHeader: z.string().meta({ example: 'X-Service-Webhook-Timestamp' }),
    idHeader: z.string().meta({ example: 'X-Service-Webhook-Id' }),
    attemptHeader: z.string().meta({ example: 'X-Service-Webhook-Attempt' }),
    headers: z
      .array(z.string())
      .meta({ description: 'Headers every delivery carries (the signature one when a secret is set)' }),
    signatureAlgorithm: z.literal('hmac-sha256'),
    signedContent: z.literal('raw_body'),
    successStatusCodes: z.array(z.string()).meta({ example: ['2xx'] }),
    retryStrategy: z
      .object({
        maxAttempts: z.number().int().meta({ example: 3 }),
        backoffSeconds: z.array(z.number().int()).meta({
          description: 'Wait before attempt n+1 after attempt n failed; the last value repeats',
          example: [15, 60],
        }),
      })
      .meta({ id: 'WebhookRetryStrategy' }),
    timeoutSeconds: z
      .number()
      .int()
      .meta({ description: 'An attempt with no response status within this time has failed', example: 10 }),
    testEvent: z.string().meta({
      description: 'Event name of the test event sent by POST /webhooks/subscriptions/{id}/test',
      example: WEBHOOK_TEST_EVENT,
    }),
  })
  .meta({ id: 'WebhookDeliveryContract' });

export const WebhookPayloadShape = z.record(z.string(), z.string()).meta({
  id: 'WebhookPayloadShape',
  description: 'Each field of a delivery body with its type',
  example: {
    event: 'string',
    entityType: 'string',
    entityId: 'uuid, nullable',
    tenantId: 'uuid',
    createdAt: 'date-time, nullable',
    data: 'object',
  },
});

export const WebhookEventListResponse = z
  .object({ items: z.array(WebhookEvent), delivery: WebhookDeliveryContract, payload: WebhookPayloadShape })
  .meta({ id: 'WebhookEventListResponse' });

/** Body of each delivery: the spec's payload. */
export const WebhookPayload = z
  .object({
    event: z.string(),
    entityType: z.string(),
    entityId: z.uuid().nullable(),
    tenantId: z.uuid(),
    createdAt: nullableDateTime,
    data: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'WebhookPayload' });

export const WebhookSubscription = z
  .object({
    id: z.uuid().meta({ description: 'Subscription id' }),
    name: z.string(),
    url: z.url().meta({ description: 'http(s) URL receiving the POSTs' }),
    enabled: z.boolean(),
    events: z.array(z.string()),
    secretSet: z.boolean(),
    secretPreview: z.string().meta({
      description: 'Masked preview of the secret (empty when none is set); the secret itself is never returned',
      example: 'whsec_****9f3a',
    }),
    createdAt: dateTime,
    updatedAt: dateTime,
  })
  .meta({ id: 'WebhookSubscription' });
export type WebhookSubscription = z.infer<typeof WebhookSubscription>;

/**
 * The answer of a create or change. The one exception to "the secret is never returned":
 * a secret the server generated (create without `secret`, or `rotateSecret: true`) is in
 * that answer, once. A secret the client chose is never echoed.
 */
export const WebhookSubscriptionWithSecret = WebhookSubscription.extend({
  secret: z
    .string()
    .optional()
    .meta({
      description:
        'Only when this call generated the secret (create without `secret`, or `rotateSecret: true`): shown this once, store it now. ' +
        'A secret the client sent is never echoed.',
    }),
}).meta({ id: 'WebhookSubscriptionWithSecret' });

export const WebhookSubscriptionListResponse = z
  .object({ items: z.array(WebhookSubscription) })
  .meta({ id: 'WebhookSubscriptionListResponse' });

const eventName = z.enum(webhookEventTypes, { error: `must be one of ${webhookEventTypes.join(', ')}` });
const eventList = z
  .array(eventName)
  .min(1, 'must name at least one event')
  .max(webhookEventTypes.length * 4)
  .transform((events) => [...new Set(events)]);
const subscriptionName = z.string().trim().min(1, 'must not be empty').max(200, 'at most 200 characters');
const subscriptionUrl = z.string().trim().min(1, 'must not be empty').max(2048, 'at most 2048 characters');
const secretValue = z
  .string()
  .min(16, 'at least 16 characters')
  .max(256, 'at most 256 characters')
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const WebhookSubscriptionCreate = z
  .object({
    name: subscriptionName.optional().meta({ description: 'Defaults to the URL host' }),
    url: subscriptionUrl.meta({
      description: 'http(s) URL receiving the POSTs',
      format: 'uri',
      example: 'https://example.com/hooks/gantry',
    }),
    events: eventList.meta({ description: 'Event names from the catalog' }),
    enabled: z.boolean().default(true),
    secret: secretValue
      .nullable()
      .optional()
      .meta({ description: 'Signing secret; omitted → one is generated; null → deliveries are not signed' }),
  })
  .meta({ id: 'WebhookSubscriptionCreateRequest' });
export type WebhookSubscriptionCreate = z.infer<typeof WebhookSubscriptionCreate>;

export const WebhookSubscriptionUpdate = z
  .object({
    name: subscriptionName.optional(),
    url: subscriptionUrl.optional().meta({ description: 'http(s) URL receiving the POSTs', format: 'uri' }),
    events: eventList.optional(),
    enabled: z.boolean().optional(),
    secret: secretValue.nullable().optional().meta({ description: 'A new secret, or null to stop signing' }),
    rotateSecret: z
      .boolean()
      .optional()
      .meta({ description: 'true → a new secret is generated and returned in this answer' }),
  })
  .refine((body) => !(body.rotateSecret && body.secret !== undefined), {
    message: 'give either secret or rotateSecret, not both',
    path: ['rotateSecret'],
  })
  .meta({ id: 'WebhookSubscriptionUpdateRequest' });
export type WebhookSubscriptionUpdate = z.infer<typeof WebhookSubscriptionUpdate>;

export const deliveryStatuses = ['pending', 'retrying', 'delivered', 'failed'] as const;

export const WebhookDelivery = z
  .object({
    id: z.uuid().meta({ description: 'Delivery id, sent as X-Service-Webhook-Id on every attempt' }),
    webhookId: z.uuid().meta({ description: 'Id of the subscription' }),
    url: z
      .string()
      .meta({ description: 'URL of the latest attempt (the subscription URL at that time)', format: 'uri' }),
    eventType: z.string(),
    entityType: z.string(),
    status: z.enum(deliveryStatuses).meta({
      description:
        'pending (not attempted yet), retrying (an attempt failed, another is scheduled), delivered or failed',
    }),
    error: z.string().meta({ description: 'Error of the latest attempt; empty when it succeeded or none was made' }),
    entityId: z.uuid().nullable(),
    httpStatus: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'Response status of the latest attempt; null when none came' }),
    attemptCount: z.number().int(),
    maxAttempts: z.number().int(),
    createdAt: nullableDateTime,
    deliveredAt: nullableDateTime,
    lastAttemptAt: nullableDateTime,
    nextAttemptAt: nullableDateTime,
  })
  .meta({ id: 'WebhookDelivery' });
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const WebhookDeliveryListResponse = z
  .object({ items: z.array(WebhookDelivery), paging: Paging })
  .meta({ id: 'WebhookDeliveryListResponse' });

export const WebhookDeliveryAttempt = z
  .object({
    attempt: z.number().int(),
    startedAt: dateTime,
    durationMs: z.number().int().nullable(),
    httpStatus: z.number().int().nullable(),
    error: z.string(),
  })
  .meta({ id: 'WebhookDeliveryAttempt' });

export const WebhookDeliveryDetail = WebhookDelivery.extend({
  payload: WebhookPayload.meta({ description: 'The exact body sent (and signed) on every attempt, parsed' }),
  attempts: z.array(WebhookDeliveryAttempt),
}).meta({ id: 'WebhookDeliveryDetail' });

const knownEventTypes = [...webhookEventTypes, WEBHOOK_TEST_EVENT] as const;

export const WebhookDeliveryListQuery = z.object({
  webhookId: z.uuid('must be a UUID').optional().meta({ description: 'Only deliveries of this subscription' }),
  eventType: z.enum(knownEventTypes, { error: `must be one of ${knownEventTypes.join(', ')}` }).optional(),
  status: z.enum(deliveryStatuses, { error: `must be one of ${deliveryStatuses.join(', ')}` }).optional(),
  entityId: z.uuid('must be a UUID').optional().meta({ description: 'Only deliveries about this entity' }),
  from: timeParam
    .optional()
    .meta({ description: 'Deliveries created at or after (YYYY-MM-DD = start of that UTC day)' }),
  to: timeParam
    .optional()
    .meta({ description: 'Deliveries created before (a date-only value includes that whole day)' }),
  limit: limitParam,
  offset: offsetParam,
});
export type WebhookDeliveryListQuery = z.infer<typeof WebhookDeliveryListQuery>;
