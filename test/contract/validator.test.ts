import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from '@gantry/api';
import { unwatchContract, watchContract } from '../support/contract.ts';
import { ADMIN_TOKEN, fetchServedDocuments, startDatabaseFreeApi, type ServedDocuments } from './served-document.ts';
import { ContractMismatchError, ContractValidator, type ObservedResponse } from './validator.ts';

// The contract check must fail on a wrong answer, or the integration suite proves
// nothing: wrong answers made by hand are caught here, by the validator and by the
// fetch hook every integration test goes through.

let documents: ServedDocuments;
let validator: ContractValidator;

beforeAll(async () => {
  documents = await fetchServedDocuments();
  validator = new ContractValidator({ '/api/external/v1': documents.external, '/api/admin/v1': documents.admin });
});

const TENANT = '6f1c0b8e-3f2a-4c4e-9d4b-0a1b2c3d4e5f';
const me = {
  tenant: { id: TENANT, name: 'Acme Port' },
  apiKey: { name: 'ERP', customerName: null, customerScoped: false },
  version: 'v1',
};
const asset = {
  id: '0b6d7a4e-5b8f-4f7a-9c51-3d2e1f0a9b8c',
  identifier: 'SC-01',
  name: 'Straddle carrier 1',
  displayCode: 'SC-01',
  assetType: 'Straddle carrier',
  location: 'Quay 3',
  customerName: 'Acme',
};
function metrics(itemAsset: unknown) {
  return {
    items: [
      {
        bucketStart: '2026-11-20T00:00:00.000Z',
        bucketEnd: '2026-11-21T00:00:00.000Z',
        groupType: itemAsset === null ? 'fleet' : 'asset',
        asset: itemAsset,
        closedCount: 1,
        highPriorityCount: 0,
        openCount: 2,
        resolvedCount: 0,
        totalCount: 3,
        urgentPriorityCount: 1,
      },
    ],
    paging: { limit: 100, offset: 0 },
    range: { from: '2026-11-20T00:00:00.000Z', to: '2026-11-21T00:00:00.000Z' },
    aggregateRefresh: { status: 'ok', coverageFrom: null, coverageTo: null, updatedAt: null },
    bucket: 'day',
    groupBy: 'fleet',
    source: 'gold',
  };
}

const answer = (overrides: Partial<ObservedResponse> & { json?: unknown }): ObservedResponse => {
  const { json, ...rest } = overrides;
  return {
    method: 'GET',
    path: '/api/external/v1/me',
    status: 200,
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify(json ?? me),
    ...rest,
  };
};

describe('the contract validator (the served document, not the zod schemas)', () => {
  it('accepts a right answer and the null asset of a fleet bucket, documented nullable the 3.0.3 way', () => {
    expect(validator.check(answer({}))).toEqual([]);
    const path = '/api/external/v1/telemetry/service-request-metrics';
    expect(validator.check(answer({ path, json: metrics(null) }))).toEqual([]);
    expect(validator.check(answer({ path, json: metrics(asset) }))).toEqual([]);
  });

  it('catches a missing field, a wrong type, a bad format, an undocumented field and a wrong asset', () => {
    const { version: _version, ...withoutVersion } = me;
    expect(validator.check(answer({ json: withoutVersion })).join()).toMatch(/must have required property 'version'/);
    expect(validator.check(answer({ json: { ...me, version: 1 } })).join()).toMatch(/\/version must be string/);
    expect(validator.check(answer({ json: { ...me, tenant: { id: 'not-a-uuid', name: 'x' } } })).join()).toMatch(
      /\/tenant\/id must match format "uuid"/,
    );
    expect(validator.check(answer({ json: { ...me, secret: 'leak' } })).join()).toMatch(
      /must NOT have additional properties.*secret/,
    );
    const path = '/api/external/v1/telemetry/service-request-metrics';
    // The placeholder asset the API used to send for "no asset" is not an AssetRef.
    expect(validator.check(answer({ path, json: metrics({ id: '', name: '' }) })).length).toBeGreaterThan(0);
    expect(validator.check(answer({ path, json: metrics('none') })).length).toBeGreaterThan(0);
  });

  it('catches an undocumented status, content type, path or method', () => {
    expect(validator.check(answer({ status: 418 })).join()).toMatch(/does not document status 418/);
    expect(validator.check(answer({ contentType: 'text/plain', body: 'hello' })).join()).toMatch(
      /content type text\/plain is not documented/,
    );
    expect(validator.check(answer({ path: '/api/external/v1/nowhere' })).join()).toMatch(
      /JSON from a path that is not in the document/,
    );
    expect(validator.check(answer({ method: 'DELETE', status: 200 })).join()).toMatch(/DELETE is not in the document/);
    const notAllowed = { error: 'method TRACE is not allowed', code: 'method_not_allowed' };
    expect(validator.check(answer({ method: 'TRACE', status: 405, json: notAllowed, allow: 'GET, HEAD' }))).toEqual([]);
    expect(validator.check(answer({ method: 'TRACE', status: 405, json: notAllowed, allow: null })).join()).toMatch(
      /405 without Allow/,
    );
    // An error body must be the documented ErrorResponse.
    expect(validator.check(answer({ status: 401, json: { message: 'no' } })).join()).toMatch(/error/);
  });
});

describe('the served documents say what the server sends and accepts', () => {
  type Json = any;
  const operations = (document: Json) =>
    Object.entries<Json>(document.paths).flatMap(([path, item]) =>
      Object.entries<Json>(item).map(([method, operation]) => ({ path, method, operation })),
    );

  it('describes every tag, names a licence, and gives no query or path parameter a nullable', () => {
    for (const document of [documents.external, documents.admin] as Json[]) {
      expect(document.info.license.name).toBe('Proprietary');
      for (const tag of document.tags) expect(tag.description, tag.name).toEqual(expect.any(String));
      for (const { path, operation } of operations(document))
        for (const parameter of operation.parameters ?? [])
          expect(parameter.schema.nullable, `${path} ${parameter.name}`).toBeUndefined();
    }
  });

  it('states 405 on every operation, 413 and 415 on every body, and a pattern on from, to and dueAt', () => {
    for (const document of [documents.external, documents.admin] as Json[]) {
      for (const { path, method, operation } of operations(document)) {
        expect(Object.keys(operation.responses), `${method} ${path}`).toContain('405');
        expect(operation.responses['405'].headers, `${method} ${path}`).toHaveProperty('Allow');
        if (operation.requestBody)
          expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['413', '415']));
        for (const parameter of operation.parameters ?? [])
          if (['from', 'to'].includes(parameter.name))
            expect(parameter.schema.pattern, `${path} ${parameter.name}`).toBeTruthy();
      }
    }
    const schemas = (documents.external as Json).components.schemas;
    expect(schemas.ServiceRequestCreateRequest.properties.dueAt.pattern).toBeTruthy();
    expect(schemas.WebhookSubscription.properties.url.format).toBe('uri');
    expect(schemas.WebhookSubscription.properties.id.format).toBe('uuid');
    // A nullable reference the 3.0.3 way, and the referenced component itself not nullable.
    expect(schemas.ServiceRequest.properties.asset).toEqual({
      oneOf: [{ $ref: '#/components/schemas/AssetRef' }, { type: 'object', nullable: true, enum: [null] }],
    });
    expect(schemas.AssetRef.nullable).toBeUndefined();
    expect(JSON.stringify(documents.external)).not.toContain('"allOf"');
  });

  it('documents the content type of every file download', () => {
    const paths = (documents.external as Json).paths;
    expect(Object.keys(paths['/service-requests/{id}/files/{fileId}'].get.responses['200'].content)).toEqual(['*/*']);
    expect(Object.keys(paths['/reporting/export.csv'].get.responses['200'].content)).toEqual(['text/csv']);
    expect(Object.keys(paths['/reporting/export.xlsx'].get.responses['200'].content)).toEqual([
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    ]);
  });
});

describe('the fetch hook of the test harness', () => {
  let server: ApiServer;
  beforeAll(async () => {
    server = await startDatabaseFreeApi();
  });
  afterAll(async () => {
    unwatchContract(server.url);
    await server.close();
  });

  it('fails a test whose answer does not match the document, and passes one that does', async () => {
    watchContract(server.url, ADMIN_TOKEN);
    const unknown = await fetch(`${server.url}/api/external/v1/nowhere`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found' });

    // The same server, checked against a document whose ErrorResponse demands a field
    // the server never sends: the very same call now throws.
    const broken = structuredClone(documents.external) as {
      components: { schemas: Record<string, { required: string[]; properties: Record<string, unknown> }> };
    };
    broken.components.schemas.ErrorResponse!.required.push('traceId');
    broken.components.schemas.ErrorResponse!.properties.traceId = { type: 'string' };
    watchContract(server.url, ADMIN_TOKEN, { '/api/external/v1': broken, '/api/admin/v1': documents.admin });
    const caught = await fetch(`${server.url}/api/external/v1/nowhere`).catch((error: unknown) => error);
    expect(caught).toBeInstanceOf(ContractMismatchError);
    expect((caught as ContractMismatchError).problems.join()).toMatch(/must have required property 'traceId'/);
  });
});

describe('the edges, as a client sees them', () => {
  let server: ApiServer;
  beforeAll(async () => {
    server = await startDatabaseFreeApi();
    watchContract(server.url, ADMIN_TOKEN);
  });
  afterAll(async () => {
    unwatchContract(server.url);
    await server.close();
  });

  /** A raw request (fetch refuses TRACE and CONNECT), checked against the document. */
  function raw(
    method: string,
    path: string,
  ): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
    const url = new URL(server.url);
    return new Promise((resolve, reject) => {
      const request = http.request({ host: url.hostname, port: url.port, method, path }, (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      });
      // The answer to a CONNECT comes as a 'connect' event: the body follows on the socket.
      request.on('connect', (response: http.IncomingMessage, socket, head: Buffer) => {
        let body = head.toString('utf8');
        socket.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        socket.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      });
      request.on('error', reject);
      request.end();
    });
  }

  it.each(['TRACE', 'CONNECT', 'PUT', 'DELETE', 'PATCH'])(
    '%s on a GET-only path is a JSON 405 with Allow, as documented',
    async (method) => {
      const answer = await raw(method, '/api/external/v1/me');
      expect(answer.status).toBe(405);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.headers.allow).toBe('HEAD, GET');
      expect(JSON.parse(answer.body)).toEqual({
        error: `method ${method} is not allowed on /api/external/v1/me`,
        code: 'method_not_allowed',
      });
      expect(
        validator.check({
          method,
          path: '/api/external/v1/me',
          status: answer.status,
          contentType: String(answer.headers['content-type']),
          body: answer.body,
          allow: answer.headers.allow ?? null,
        }),
      ).toEqual([]);
    },
  );
});
