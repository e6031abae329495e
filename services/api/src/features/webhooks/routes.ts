import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { DeleteResponse, ErrorResponse } from '../../http/common-schemas.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import {
  WebhookDelivery,
  WebhookDeliveryDetail,
  WebhookDeliveryListQuery,
  WebhookDeliveryListResponse,
  WebhookEventListResponse,
  WebhookSubscription,
  WebhookSubscriptionCreate,
  WebhookSubscriptionListResponse,
  WebhookSubscriptionUpdate,
  WebhookSubscriptionWithSecret,
} from './schemas.ts';
import * as webhooks from './service.ts';

const tags = ['Webhooks'];
const idParams = z.object({ id: z.uuid('must be a UUID') });

const unauthorized = { description: 'Missing, disabled or invalid key', schema: ErrorResponse };
const forbidden = { description: 'Customer-scoped keys may not manage webhooks', schema: ErrorResponse };
const badRequest = { description: 'Invalid parameter or body', schema: ErrorResponse };
const notFound = { description: 'No such object in this tenant', schema: ErrorResponse };

/** The spec's Webhooks part. Subscriptions and deliveries are tenant-wide settings: they need a tenant-wide key. */
export function webhookRoutes(deps: AppDeps): RouteSpec[] {
  const service: webhooks.WebhookDeps = { pool: deps.pool, config: deps.config };
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/webhooks/events',
      operationId: 'listWebhookEvents',
      summary: 'Webhook event catalog, delivery contract and payload shape',
      description: 'Readable with any key: it describes the service, not tenant data.',
      tags,
      auth: 'apiKey',
      responses: { 200: { description: 'The catalog', schema: WebhookEventListResponse }, 401: unauthorized },
      handler: async (ctx) => {
        ctx.body = webhooks.eventCatalog(deps.config);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/webhooks/subscriptions',
      operationId: 'listWebhookSubscriptions',
      summary: "The tenant's webhook subscriptions",
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      responses: {
        200: { description: 'Subscriptions', schema: WebhookSubscriptionListResponse },
        401: unauthorized,
        403: forbidden,
      },
      handler: async (ctx, { auth }) => {
        ctx.body = { items: await webhooks.listSubscriptions(service, requireApiKey(auth).tenantId) };
      },
    }),
    defineRoute({
      method: 'post',
      base: 'external',
      path: '/webhooks/subscriptions',
      operationId: 'createWebhookSubscription',
      summary: 'Create a webhook subscription (the signing secret is in this answer only)',
      description:
        'The URL must be http(s) and, unless the deployment allows private targets, resolve only to public addresses. ' +
        'Without `secret` one is generated and shown in this answer only; a `secret` you send is kept and never echoed; ' +
        '`secret: null` creates a subscription whose deliveries are not signed.',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { body: WebhookSubscriptionCreate },
      responses: {
        201: { description: 'Created; a generated `secret` is shown this once', schema: WebhookSubscriptionWithSecret },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        409: { description: 'Subscription limit reached', schema: ErrorResponse },
      },
      handler: async (ctx, { auth, body }) => {
        ctx.status = 201;
        ctx.body = await webhooks.createSubscription(service, requireApiKey(auth).tenantId, body);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/webhooks/subscriptions/:id',
      operationId: 'getWebhookSubscription',
      summary: 'One webhook subscription',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { params: idParams },
      responses: {
        200: { description: 'The subscription', schema: WebhookSubscription },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        404: notFound,
      },
      handler: async (ctx, { auth, params }) => {
        ctx.body = await webhooks.getSubscription(service, requireApiKey(auth).tenantId, params.id);
      },
    }),
    defineRoute({
      method: 'patch',
      base: 'external',
      path: '/webhooks/subscriptions/:id',
      operationId: 'updateWebhookSubscription',
      summary: 'Change a webhook subscription (name, url, events, enabled, secret)',
      description:
        'Disabling fails its pending deliveries (they can be redelivered after enabling again). ' +
        '`rotateSecret: true` generates a new secret, returned in this answer only; the next attempt of every delivery is signed with it.',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { params: idParams, body: WebhookSubscriptionUpdate },
      responses: {
        200: { description: 'The changed subscription', schema: WebhookSubscriptionWithSecret },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        404: notFound,
      },
      handler: async (ctx, { auth, params, body }) => {
        ctx.body = await webhooks.updateSubscription(service, requireApiKey(auth).tenantId, params.id, body);
      },
    }),
    defineRoute({
      method: 'delete',
      base: 'external',
      path: '/webhooks/subscriptions/:id',
      operationId: 'deleteWebhookSubscription',
      summary: 'Delete a webhook subscription',
      description: 'Its pending deliveries fail; the delivery log keeps its past deliveries.',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { params: idParams },
      responses: {
        200: { description: 'Deleted', schema: DeleteResponse },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        404: notFound,
      },
      handler: async (ctx, { auth, params }) => {
        ctx.body = await webhooks.deleteSubscription(service, requireApiKey(auth).tenantId, params.id);
      },
    }),
    defineRoute({
      method: 'post',
      base: 'external',
      path: '/webhooks/subscriptions/:id/test',
      operationId: 'testWebhookSubscription',
      summary: 'Send a signed test event (webhook.test) to the subscription',
      description:
        'Queues a delivery that the worker sends at once with the full contract (signature, headers, retries); ' +
        'follow it in the delivery log. Works on disabled subscriptions too.',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { params: idParams },
      responses: {
        202: { description: 'The queued delivery', schema: WebhookDelivery },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        404: notFound,
      },
      handler: async (ctx, { auth, params }) => {
        ctx.status = 202;
        ctx.body = await webhooks.sendTestEvent(service, requireApiKey(auth).tenantId, params.id);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/webhooks/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: 'The delivery log, newest first',
      description: 'Filters: webhookId (subscription), eventType, status, entityId, from/to on the creation time.',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { query: WebhookDeliveryListQuery },
      responses: {
        200: { description: 'Deliveries', schema: WebhookDeliveryListResponse },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
      },
      handler: async (ctx, { auth, query }) => {
        ctx.body = await webhooks.listDeliveries(service, requireApiKey(auth).tenantId, query);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/webhooks/deliveries/:id',
      operationId: 'getWebhookDelivery',
      summary: 'One delivery with its payload and every attempt',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { params: idParams },
      responses: {
        200: { description: 'The delivery', schema: WebhookDeliveryDetail },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        404: notFound,
      },
      handler: async (ctx, { auth, params }) => {
        ctx.body = await webhooks.getDelivery(service, requireApiKey(auth).tenantId, params.id);
      },
    }),
    defineRoute({
      method: 'post',
      base: 'external',
      path: '/webhooks/deliveries/:id/redeliver',
      operationId: 'redeliverWebhookDelivery',
      summary: 'Send a delivery again, now, with the same id and body',
      description:
        'A delivered or failed delivery gets a fresh set of attempts (attempt numbers continue); a pending or retrying one is brought forward. ' +
        'The X-Service-Webhook-Id stays the same, so receivers that already processed it can recognise it.',
      tags,
      auth: 'apiKey',
      tenantKeyOnly: true,
      request: { params: idParams },
      responses: {
        202: { description: 'Queued again', schema: WebhookDelivery },
        400: badRequest,
        401: unauthorized,
        403: forbidden,
        404: notFound,
        409: {
          description: 'Being attempted right now, or its subscription is disabled or deleted',
          schema: ErrorResponse,
        },
      },
      handler: async (ctx, { auth, params }) => {
        ctx.status = 202;
        ctx.body = await webhooks.redeliver(service, requireApiKey(auth).tenantId, params.id);
      },
    }),
  ];
}
