import net from 'node:net';
import { Writable } from 'node:stream';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { createLogger } from '@gantry/logger';
import { createPool } from '@gantry/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteSpec } from '../../services/api/src/http/route.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';
import { externalKeyRoutes, registeredRoutes } from './support.ts';

/** The 43-character secret of a key gk_<prefix>_<secret> (the secret may itself hold "_"). */
function keySecret(key: string): string {
  const secret = key.slice('gk_'.length + 12 + 1);
  expect(secret).toHaveLength(43);
  return secret;
}

const MAX_JSON_BYTES = 4096;
const MAX_UPLOAD_BYTES = 16 * 1024;

let db: TestDatabase;
let api: TestApi;
let tenant: TenantFixture;
let routes: RouteSpec[];
const logLines: string[] = [];

function capturingLogger() {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  return createLogger({ level: 'debug', format: 'json', destination: sink });
}

beforeAll(async () => {
  db = await createTestDatabase('hardening');
  api = await startTestApi(
    db.pool,
    db.url,
    {
      GANTRY_MAX_JSON_BYTES: String(MAX_JSON_BYTES),
      GANTRY_MAX_UPLOAD_BYTES: String(MAX_UPLOAD_BYTES),
      GANTRY_REQUEST_TIMEOUT_MS: '2000',
    },
    capturingLogger(),
  );
  routes = externalKeyRoutes(await registeredRoutes(db.pool, api.config));
  tenant = await createTenantWithKeys(db.pool, ['Acme']);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('errors say nothing of internals', () => {
  it('a database that refuses connections gives a 503 with Retry-After and a request id; the log has the cause and the request id, never the key', async () => {
    // The same app on a pool whose server refuses connections: a real failure, no mock.
    const broken = createPool('postgres://postgres@127.0.0.1:1/gantry_nowhere_test', { max: 1 });
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const failing = await startTestApi(
      broken,
      db.url,
      {},
      createLogger({ level: 'debug', format: 'json', destination: sink }),
    );
    try {
      const response = await failing.external('/me', tenant.tenantKey);
      expect(response.status).toBe(503);
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
      const requestId = response.headers.get('x-request-id');
      expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
      const text = await response.text();
      expect(JSON.parse(text)).toEqual({
        error: 'the database is unavailable right now; retry shortly',
        code: 'database_unavailable',
      });
      const failure = lines.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'database unavailable');
      expect(failure).toMatchObject({ requestId, path: '/api/external/v1/me' });
      expect(JSON.stringify(failure.err)).toMatch(/ECONNREFUSED/);
      const secret = keySecret(tenant.tenantKey);
      expect(lines.join('\n')).not.toContain(secret);
    } finally {
      await failing.close();
      await broken.end();
    }
  });

  it('every error carries X-Request-Id, and the access log line names the same id', async () => {
    const response = await api.external('/me', 'gk_aaaaaaaaaaaa_not-a-real-key');
    expect(response.status).toBe(401);
    const requestId = response.headers.get('x-request-id')!;
    expect(requestId).toBeTruthy();
    const logged = logLines.map((line) => JSON.parse(line)).find((entry) => entry.requestId === requestId);
    expect(logged).toMatchObject({ msg: 'request', status: 401, path: '/api/external/v1/me' });
  });

  it('keys never reach the logs: valid, wrong-secret and customer keys, in any header casing', async () => {
    const wrong = `${tenant.tenantKey.slice(0, 16)}${'Z'.repeat(43)}`;
    await api.external('/me', tenant.tenantKey);
    await api.external('/me', wrong);
    await fetch(`${api.url}/api/external/v1/me`, { headers: { 'x-API-key': tenant.customerKeys.Acme! } });
    const text = logLines.join('\n');
    expect(logLines.length).toBeGreaterThan(0);
    for (const key of [tenant.tenantKey, wrong, tenant.customerKeys.Acme!]) {
      expect(text).not.toContain(keySecret(key));
    }
  });

  it('API answers forbid rendering, framing and shared caching', async () => {
    const response = await api.external('/me', tenant.tenantKey);
    expect(response.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
  });
});

describe('body limits and content types (spec: Errors 413)', () => {
  it('a JSON body over the limit is 413 {"error"} on every route that takes a body', async () => {
    const withBody = routes.filter((route) => route.request?.body);
    expect(withBody.length).toBeGreaterThan(0);
    for (const route of withBody) {
      const response = await api.external(
        route.path.replace(/:[A-Za-z0-9_]+/g, '00000000-0000-4000-8000-000000000000'),
        tenant.tenantKey,
        {
          method: route.method.toUpperCase(),
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ title: 'x'.repeat(MAX_JSON_BYTES * 2) }),
        },
      );
      expect(response.status, route.operationId).toBe(413);
      expect(await json(response)).toEqual({ error: 'request body is too large', code: 'payload_too_large' });
    }
  });

  it('an upload over the limit is 413 {"error"} on every multipart route', async () => {
    const uploads = routes.filter((route) => route.request?.multipart);
    expect(uploads.length).toBeGreaterThan(0);
    const created = await json(
      await api.external('/service-requests', tenant.tenantKey, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ title: 'Upload limit' }),
      }),
    );
    for (const route of uploads) {
      const form = new FormData();
      form.append(route.request!.multipart!.fileField, new Blob([Buffer.alloc(MAX_UPLOAD_BYTES * 2, 'x')]), 'big.txt');
      const response = await api.external(route.path.replace(/:[A-Za-z0-9_]+/g, created.id), tenant.tenantKey, {
        method: 'POST',
        body: form,
      });
      expect(response.status, route.operationId).toBe(413);
      expect((await json(response)).error).toEqual(expect.any(String));
    }
  });

  it.each([
    ['text/plain', '{"title":"x"}'],
    ['application/x-www-form-urlencoded', 'title=x'],
    ['multipart/form-data; boundary=x', '--x--'],
    ['application/xml', '<title>x</title>'],
  ])('a JSON route answers 415 naming the expected type for a %s body', async (type, body) => {
    const withBody = routes.filter((route) => route.request?.body && !route.path.includes(':'));
    for (const route of withBody) {
      const response = await api.external(route.path, tenant.tenantKey, {
        method: route.method.toUpperCase(),
        headers: { 'Content-Type': type },
        body,
      });
      expect(response.status, `${route.operationId} ${type}`).toBe(415);
      expect((await json(response)).error).toMatch(/application\/json/);
    }
  });

  it('a gzip, deflate or br JSON body is read; the size limit counts the decoded bytes (a small bomb is 413)', async () => {
    const title = 'Leak seen through a compressed body';
    const plain = Buffer.from(JSON.stringify({ title }));
    for (const [encoding, compress] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
      ['GZip', gzipSync],
    ] as const) {
      const response = await api.external('/service-requests', tenant.tenantKey, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Content-Encoding': encoding },
        body: compress(plain),
      });
      expect(response.status, encoding).toBe(201);
      expect((await json(response)).title).toBe(title);
    }
    // 2 MB of JSON that compresses to about 2 KB: refused once decoded past the limit.
    const bomb = gzipSync(Buffer.from(JSON.stringify({ title: 'x'.repeat(2_000_000) })));
    expect(bomb.length).toBeLessThan(MAX_JSON_BYTES);
    const refused = await api.external('/service-requests', tenant.tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: bomb,
    });
    expect(refused.status).toBe(413);
    expect(await json(refused)).toMatchObject({ code: 'payload_too_large' });
  });

  it.each([
    ['Content-Encoding: zstd', { 'Content-Encoding': 'zstd' }, '{"title":"x"}', 415, 'unsupported_content_encoding'],
    [
      'Content-Encoding: gzip, br',
      { 'Content-Encoding': 'gzip, br' },
      '{"title":"x"}',
      415,
      'unsupported_content_encoding',
    ],
    [
      'Content-Encoding: compress',
      { 'Content-Encoding': 'compress' },
      '{"title":"x"}',
      415,
      'unsupported_content_encoding',
    ],
    ['a body that is not gzip data', { 'Content-Encoding': 'gzip' }, '{"title":"x"}', 400, 'invalid_body'],
    ['charset=nope', { 'Content-Type': 'application/json; charset=nope' }, '{"title":"x"}', 415, 'unsupported_charset'],
    [
      'charset=latin1',
      { 'Content-Type': 'application/json; charset=latin1' },
      '{"title":"x"}',
      415,
      'unsupported_charset',
    ],
    ['an empty Idempotency-Key', { 'Idempotency-Key': '' }, '{"title":"x"}', 400, 'invalid_header'],
  ])('%s is refused with a JSON %i', async (_label, headers, body, status, code) => {
    const before = await db.pool.query('SELECT count(*)::int AS n FROM service_requests');
    const response = await api.external('/service-requests', tenant.tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
    });
    expect(response.status).toBe(status);
    expect(await json(response)).toMatchObject({ code });
    const after = await db.pool.query('SELECT count(*)::int AS n FROM service_requests');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('an upload with a Content-Encoding is 415 (files are sent as they are)', async () => {
    const created = await json(
      await api.external('/service-requests', tenant.tenantKey, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ title: 'For an upload' }),
      }),
    );
    const form = new FormData();
    form.append('file', new Blob([gzipSync(Buffer.from('hello'))]), 'hello.txt');
    const response = await api.external(`/service-requests/${created.id}/files`, tenant.tenantKey, {
      method: 'POST',
      headers: { 'Content-Encoding': 'gzip' },
      body: form,
    });
    expect(response.status).toBe(415);
    expect(await json(response)).toMatchObject({ code: 'unsupported_content_encoding' });
  });

  it('malformed JSON, NUL characters and deep nesting are 400, not 500', async () => {
    const route = routes.find((r) => r.request?.body && !r.path.includes(':'))!;
    for (const body of [
      '{"title":',
      '{"title":"a\\u0000b"}',
      `${'['.repeat(50_000)}${']'.repeat(50_000)}`.slice(0, MAX_JSON_BYTES - 10),
      '\u0000',
    ]) {
      const response = await api.external(route.path, tenant.tenantKey, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body,
      });
      expect(response.status, body.slice(0, 20)).toBe(400);
      expect((await json(response)).error).toEqual(expect.any(String));
    }
  });
});

/** Opens a raw socket and trickles `head` one byte at a time; resolves when the server closes it. */
function trickle(
  port: number,
  head: string,
  intervalMs: number,
  maxBytes: number,
): Promise<{ closedBeforeDone: boolean; answer: string }> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let sent = 0;
    let answer = '';
    let closed = false;
    socket.on('data', (chunk) => (answer += String(chunk)));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      clearInterval(timer);
      resolve({ closedBeforeDone: true, answer });
    });
    const timer = setInterval(() => {
      if (closed) return;
      if (sent >= maxBytes) {
        clearInterval(timer);
        socket.destroy();
        resolve({ closedBeforeDone: false, answer });
        return;
      }
      socket.write(head[sent % head.length]!);
      sent += 1;
    }, intervalMs);
  });
}

describe('slow clients (slowloris)', () => {
  it('a client trickling its headers is cut off, and the API keeps answering others meanwhile', async () => {
    const port = Number(new URL(api.url).port);
    const head = `GET /api/external/v1/me HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.tenantKey}\r\nX-Padding: ${'a'.repeat(400)}`;
    const slow = Array.from({ length: 20 }, () => trickle(port, head, 200, 300));
    const answer = await api.external('/me', tenant.tenantKey);
    expect(answer.status).toBe(200);
    const results = await Promise.all(slow);
    for (const result of results) {
      expect(result.closedBeforeDone).toBe(true);
      expect(result.answer).not.toContain('200 OK');
    }
  }, 90_000);

  it('a client trickling its body is cut off', async () => {
    const port = Number(new URL(api.url).port);
    const head = `POST /api/external/v1/service-requests HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.tenantKey}\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n`;
    const result = await new Promise<{ closed: boolean }>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(head));
      socket.on('error', () => undefined);
      let sent = 0;
      const timer = setInterval(() => {
        if (sent++ > 300) {
          clearInterval(timer);
          socket.destroy();
          resolve({ closed: false });
        } else socket.write('{');
      }, 200);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ closed: true });
      });
    });
    expect(result.closed).toBe(true);
  }, 90_000);
});
