import type { Context } from 'koa';
import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey, type ApiKeyAuth } from '../../http/auth.ts';
import { CancelResponse, DeleteResponse, ErrorResponse } from '../../http/common-schemas.ts';
import { defineRoute, type ResponseSpec, type RouteSpec } from '../../http/route.ts';
import { UnsupportedMediaTypeError } from '../../errors.ts';
import { createFileStorage } from '../../storage/index.ts';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  idempotentRequest,
  releaseIdempotencyKey,
} from './idempotency.ts';
import {
  FileUploadResponse,
  ServiceRequest,
  ServiceRequestCancelRequest,
  ServiceRequestCreateRequest,
  ServiceRequestFileListResponse,
  ServiceRequestListQuery,
  ServiceRequestListResponse,
  ServiceRequestUpdateRequest,
} from './schemas.ts';
import * as service from './service.ts';
import type { Finalize, ServiceRequestDeps } from './service.ts';
import { MULTIPART_OVERHEAD_BYTES, receiveSingleFile, tooLarge } from './uploads.ts';

const idParams = z.object({ id: z.uuid('must be a UUID') });
const fileParams = idParams.extend({ fileId: z.uuid('must be a UUID') });

const idempotencyHeaders = z.object({
  'Idempotency-Key': z.string().min(1).max(255).optional().meta({
    description:
      'Makes the request safe to retry: remembered 24 h per API key; a repeat with the same body gets the stored answer',
  }),
});

const replayedHeader = {
  'Idempotent-Replayed': {
    description: 'true when this is the stored answer to an earlier request with the same Idempotency-Key',
    schema: { type: 'boolean' as const },
  },
};

const locationHeader = (what: string) => ({
  Location: { description: `Path of ${what}`, schema: { type: 'string' as const } },
});

const error = (description: string): ResponseSpec => ({ description, schema: ErrorResponse });
const commonErrors = {
  400: error('Invalid parameter or body'),
  401: error('Missing, disabled or invalid X-API-Key'),
  429: error('Rate limit exceeded'),
};
const notFound = error('No such service request (or file) in this key’s tenant and customer scope');
const idempotencyErrors = {
  409: error('Not allowed by the status rules, or a request with the same Idempotency-Key is still in flight'),
  422: error('The Idempotency-Key was already used with a different request'),
};

/**
 * Answers with `run`'s result, honouring an Idempotency-Key: a repeat gets the stored
 * answer (with Idempotent-Replayed: true); the first answer is stored in the change's
 * own transaction.
 */
async function respondIdempotently<T>(
  ctx: Context,
  deps: ServiceRequestDeps,
  auth: ApiKeyAuth,
  status: number,
  run: (finalize?: Finalize<T>) => Promise<T>,
): Promise<void> {
  const request = idempotentRequest(ctx.get('idempotency-key') || undefined, {
    apiKeyId: auth.keyId,
    method: ctx.method,
    path: ctx.path,
    body: (ctx.request as { body?: unknown }).body,
  });
  if (!request) {
    ctx.body = await run();
    ctx.status = status;
    return;
  }
  const claim = await claimIdempotencyKey(deps.pool, request);
  if (claim.kind === 'replay') {
    ctx.body = claim.body;
    ctx.status = claim.status;
    ctx.set('Idempotent-Replayed', 'true');
    return;
  }
  try {
    ctx.body = await run((client, result) => completeIdempotencyKey(client, claim, status, result));
    ctx.status = status;
  } catch (caught) {
    await releaseIdempotencyKey(deps.pool, claim).catch(() => undefined);
    throw caught;
  }
}

/** `attachment` with an ASCII fallback name and the original name in UTF-8 (RFC 6266). */
function contentDisposition(storedName: string, original: string): string {
  const encoded = encodeURIComponent(original).replace(
    /['()*]/g,
    (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${storedName}"; filename*=UTF-8''${encoded}`;
}

/** The spec's Service requests part, with the status rules of docs/service-requests.md. */
export function serviceRequestRoutes(appDeps: AppDeps): RouteSpec[] {
  const deps: ServiceRequestDeps = {
    pool: appDeps.pool,
    outbox: appDeps.outbox,
    storage: createFileStorage(appDeps.config, appDeps.pool),
    logger: appDeps.logger.child({ component: 'service-requests' }),
  };
  const maxUploadBytes = appDeps.config.http.maxUploadBytes;
  const tags = ['Service requests'];

  return [
    defineRoute({
      method: 'post',
      base: 'external',
      path: '/service-requests',
      operationId: 'createServiceRequest',
      summary: 'Create a service request',
      description:
        'Only title is required; category defaults to other, priority to normal, status to new. A request may be created as resolved or closed ' +
        'with a non-empty resolution and resolutionReviewed true, never as reopened or cancelled. Customer-scoped keys file for their own ' +
        'customer (another customerName is 403). Answers with the created request.',
      tags,
      auth: 'apiKey',
      request: { body: ServiceRequestCreateRequest, headers: idempotencyHeaders },
      responses: {
        201: {
          description: 'The created service request',
          schema: ServiceRequest,
          headers: { ...replayedHeader, ...locationHeader('the created request') },
        },
        ...commonErrors,
        403: error('customerName differs from the customer of a customer-scoped key'),
        ...idempotencyErrors,
      },
      handler: async (ctx, { body, auth }) => {
        const apiKey = requireApiKey(auth);
        await respondIdempotently<ServiceRequest>(ctx, deps, apiKey, 201, (finalize) =>
          service.createServiceRequest(deps, service.actorOf(apiKey), body, finalize),
        );
        const created = ctx.body as { id?: string };
        if (created.id) ctx.set('Location', `/api/external/v1/service-requests/${created.id}`);
      },
    }),

    defineRoute({
      method: 'get',
      base: 'external',
      path: '/service-requests',
      operationId: 'listServiceRequests',
      summary: 'List service requests, newest first',
      description:
        'Filters: status, priority, category (each one value or several comma-separated), assetId, customerName (exact), q (case-insensitive ' +
        'over title, displayCode and externalRef), from/to on the creation time. Customer-scoped keys see only their customer’s requests.',
      tags,
      auth: 'apiKey',
      request: { query: ServiceRequestListQuery },
      responses: {
        200: { description: 'A page of service requests', schema: ServiceRequestListResponse },
        ...commonErrors,
      },
      handler: async (ctx, { query, auth }) => {
        ctx.body = await service.listServiceRequests(deps, service.actorOf(requireApiKey(auth)), query);
      },
    }),

    defineRoute({
      method: 'get',
      base: 'external',
      path: '/service-requests/:id',
      operationId: 'getServiceRequest',
      summary: 'One service request with its files and history',
      tags,
      auth: 'apiKey',
      request: { params: idParams },
      responses: {
        200: { description: 'The service request', schema: ServiceRequest },
        ...commonErrors,
        404: notFound,
      },
      handler: async (ctx, { params, auth }) => {
        ctx.body = await service.getServiceRequest(deps, service.actorOf(requireApiKey(auth)), params.id);
      },
    }),

    defineRoute({
      method: 'patch',
      base: 'external',
      path: '/service-requests/:id',
      operationId: 'updateServiceRequest',
      summary: 'Update, resolve, close or reopen a service request',
      description:
        'Changes the given fields; status moves follow the transition table (409 names the allowed moves). Resolving or closing needs a ' +
        'non-empty resolution (given or already recorded) and resolutionReviewed true. Each field change, status change and comment adds ' +
        'a history entry. Cancelling is POST /service-requests/{id}/cancel.',
      tags,
      auth: 'apiKey',
      request: { params: idParams, body: ServiceRequestUpdateRequest, headers: idempotencyHeaders },
      responses: {
        200: { description: 'The updated service request', schema: ServiceRequest, headers: replayedHeader },
        ...commonErrors,
        403: error('customerName differs from the customer of a customer-scoped key'),
        404: notFound,
        ...idempotencyErrors,
      },
      handler: async (ctx, { params, body, auth }) => {
        const apiKey = requireApiKey(auth);
        await respondIdempotently<ServiceRequest>(ctx, deps, apiKey, 200, (finalize) =>
          service.updateServiceRequest(deps, service.actorOf(apiKey), params.id, body, finalize),
        );
      },
    }),

    defineRoute({
      method: 'post',
      base: 'external',
      path: '/service-requests/:id/cancel',
      operationId: 'cancelServiceRequest',
      summary: 'Cancel a service request (requests are never deleted)',
      description:
        'reason is required; duplicateOf may name the id or displayCode of the request this one duplicates. Resolved, closed and cancelled requests cannot be cancelled (409).',
      tags,
      auth: 'apiKey',
      request: { params: idParams, body: ServiceRequestCancelRequest, headers: idempotencyHeaders },
      responses: {
        200: { description: 'The request is cancelled', schema: CancelResponse, headers: replayedHeader },
        ...commonErrors,
        404: notFound,
        ...idempotencyErrors,
      },
      handler: async (ctx, { params, body, auth }) => {
        const apiKey = requireApiKey(auth);
        await respondIdempotently<service.CancelResult>(ctx, deps, apiKey, 200, (finalize) =>
          service.cancelServiceRequest(deps, service.actorOf(apiKey), params.id, body, finalize),
        );
      },
    }),

    defineRoute({
      method: 'post',
      base: 'external',
      path: '/service-requests/:id/files',
      operationId: 'uploadServiceRequestFile',
      summary: 'Attach a file (multipart/form-data, part "file")',
      description: `One file per request in the part "file", at most ${maxUploadBytes} bytes (413 beyond). The content type is detected from the bytes where possible; a SHA-256 checksum is kept.`,
      tags,
      auth: 'apiKey',
      request: { params: idParams, multipart: { description: 'The file to attach', fileField: 'file' } },
      responses: {
        201: {
          description: 'The stored file',
          schema: FileUploadResponse,
          headers: locationHeader('the file’s download'),
        },
        ...commonErrors,
        404: notFound,
        413: error('The file is larger than the upload limit'),
      },
      handler: async (ctx, { params, auth }) => {
        const actor = service.actorOf(requireApiKey(auth));
        await service.assertServiceRequestVisible(deps, actor, params.id);
        if (!ctx.request.is('multipart/form-data')) {
          throw new UnsupportedMediaTypeError(
            'the request body must be multipart/form-data with the file in the part "file"',
            'invalid_content_type',
          );
        }
        const declaredLength = Number(ctx.get('content-length') || 0);
        if (declaredLength > maxUploadBytes + MULTIPART_OVERHEAD_BYTES) throw tooLarge(maxUploadBytes);
        const upload = await receiveSingleFile(
          ctx.req,
          { fieldName: 'file', maxBytes: maxUploadBytes },
          (file) => service.storeUploadBytes(deps, actor, params.id, file),
          (stored) => service.discardUploadBytes(deps, stored),
        );
        ctx.body = await service.recordUpload(deps, actor, params.id, upload.file, upload.stored);
        ctx.status = 201;
        ctx.set('Location', `/api/external/v1/service-requests/${params.id}/files/${upload.stored.fileId}`);
      },
    }),

    defineRoute({
      method: 'get',
      base: 'external',
      path: '/service-requests/:id/files',
      operationId: 'listServiceRequestFiles',
      summary: 'The files attached to a service request',
      tags,
      auth: 'apiKey',
      request: { params: idParams },
      responses: {
        200: { description: 'The files, oldest first', schema: ServiceRequestFileListResponse },
        ...commonErrors,
        404: notFound,
      },
      handler: async (ctx, { params, auth }) => {
        ctx.body = await service.listFiles(deps, service.actorOf(requireApiKey(auth)), params.id);
      },
    }),

    defineRoute({
      method: 'get',
      base: 'external',
      path: '/service-requests/:id/files/:fileId',
      operationId: 'downloadServiceRequestFile',
      summary: 'Download a file with its stored content type',
      tags,
      auth: 'apiKey',
      request: { params: fileParams },
      responses: {
        200: {
          description:
            'The file’s bytes, sent with its stored content type (the `mimeType` of the file: image/png, application/pdf, …; ' +
            'application/octet-stream when unknown) and Content-Disposition: attachment',
          contentType: '*/*',
          headers: {
            'Content-Disposition': {
              description: 'attachment with the stored and the original file name',
              schema: { type: 'string' },
            },
            ETag: { description: 'The SHA-256 of the content', schema: { type: 'string' } },
          },
        },
        ...commonErrors,
        404: notFound,
      },
      handler: async (ctx, { params, auth }) => {
        const { file, stream, sizeBytes } = await service.openFile(
          deps,
          service.actorOf(requireApiKey(auth)),
          params.id,
          params.fileId,
        );
        ctx.status = 200;
        ctx.set('Content-Disposition', contentDisposition(file.storedName, file.filename));
        ctx.set('ETag', `"${file.sha256}"`);
        ctx.set('Cache-Control', 'private, no-cache');
        ctx.body = stream;
        ctx.set('Content-Type', file.mimeType);
        ctx.length = sizeBytes;
      },
    }),

    defineRoute({
      method: 'delete',
      base: 'external',
      path: '/service-requests/:id/files/:fileId',
      operationId: 'deleteServiceRequestFile',
      summary: 'Remove a file from a service request',
      tags,
      auth: 'apiKey',
      request: { params: fileParams },
      responses: {
        200: { description: 'The file is deleted', schema: DeleteResponse },
        ...commonErrors,
        404: notFound,
      },
      handler: async (ctx, { params, auth }) => {
        ctx.body = await service.deleteFile(deps, service.actorOf(requireApiKey(auth)), params.id, params.fileId);
      },
    }),
  ];
}
