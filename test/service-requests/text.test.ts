import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json } from '../support/api.ts';
import { createRequest, startWorld, type ServiceRequestWorld } from './support.ts';

// Text is stored as it was sent, or refused with a 400 naming the field: never altered
// (U+FFFD in place of what was sent) and never refused late (a 500 from PostgreSQL).

let world: ServiceRequestWorld;
let key: string;

beforeAll(async () => {
  world = await startWorld('service_request_text', ['Acme']);
  key = world.tenant.tenantKey;
});
afterAll(async () => {
  await world?.close();
});

const utf8 = (text: string) => Buffer.from(text, 'utf8');
/** The UTF-8 bytes of `before`, then bytes that are not UTF-8, then those of `after`. */
const withBadBytes = (before: string, after: string) =>
  Buffer.concat([utf8(before), Buffer.from([0xed, 0xa0, 0x80, 0xff]), utf8(after)]);

async function send(method: string, path: string, body: Buffer | string, headers: Record<string, string> = {}) {
  const response = await world.api.external(path, key, {
    method,
    headers: { 'Content-Type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, body: await json(response) };
}

/** A request over node:http, whose header values go out as the bytes given (Latin-1, one byte a character). */
function rawRequest(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ status: number; body: { error?: string; code?: string; id?: string } }> {
  const url = new URL(`${world.api.url}/api/external/v1${path}`);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: `${url.pathname}${url.search}`,
        headers: { 'X-API-Key': key, 'Content-Length': String(body.length), ...headers },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }),
        );
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** Requests where a U+FFFD was really sent (and must be kept). */
const sentReplacementCharacter: string[] = [];

/** Rows of service requests, their events and files holding U+FFFD that was not sent. */
async function storedWithReplacementCharacter(): Promise<number> {
  const { rows } = await world.db.pool.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM service_requests r
              WHERE r.id <> ALL($1::uuid[]) AND row_to_json(r)::text LIKE '%' || U&'\\FFFD' || '%')
          + (SELECT count(*) FROM service_request_events e
              WHERE e.service_request_id <> ALL($1::uuid[]) AND row_to_json(e)::text LIKE '%' || U&'\\FFFD' || '%')
          + (SELECT count(*) FROM service_request_files f
              WHERE f.service_request_id <> ALL($1::uuid[]) AND row_to_json(f)::text LIKE '%' || U&'\\FFFD' || '%')
          AS n`,
    [sentReplacementCharacter],
  );
  return Number(rows[0]!.n);
}

describe('text in service requests', () => {
  it('PATCH with a lone surrogate in the title answers 400 naming title (not 500) and changes nothing', async () => {
    const created = await createRequest(world, key, { title: 'Hydraulic leak' });
    const patched = await send('PATCH', `/service-requests/${created.id}`, '{"title":"\\ud800"}');
    expect(patched).toEqual({
      status: 400,
      body: {
        error:
          'invalid body field title: must be well-formed UTF-8 text (no lone surrogate \\uD800–\\uDFFF, no invalid bytes)',
        code: 'invalid_body',
      },
    });
    const after = await json(await world.api.external(`/service-requests/${created.id}`, key));
    expect(after.title).toBe('Hydraulic leak');
    expect(after.history).toHaveLength(created.history.length);
  });

  it('POST with a lone surrogate answers 400 naming the field, however deep, and stores nothing', async () => {
    const before = await world.db.pool.query('SELECT count(*)::int AS n FROM service_requests');
    const title = await send('POST', '/service-requests', '{"title":"Brake \\uDC00 fault"}');
    expect(title.status).toBe(400);
    expect(title.body.error).toMatch(/^invalid body field title: must be well-formed UTF-8 text/);
    const nested = await send(
      'POST',
      '/service-requests',
      '{"title":"ok","metadata":{"items":[{"name":"a"},{"name":"b"},{"name":"\\ud83d"}]}}',
    );
    expect(nested.status).toBe(400);
    expect(nested.body.error).toMatch(/^invalid body field metadata\.items\[2\]\.name: /);
    const after = await world.db.pool.query('SELECT count(*)::int AS n FROM service_requests');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('a body with bytes that are not UTF-8 answers 400 naming the field that held them', async () => {
    const created = await createRequest(world, key, { title: 'Tyre wear' });
    const post = await send('POST', '/service-requests', withBadBytes('{"title":"Brake ', ' fault"}'));
    expect(post.status).toBe(400);
    expect(post.body.error).toMatch(/^invalid body field title: must be well-formed UTF-8 text/);
    const patch = await send(
      'PATCH',
      `/service-requests/${created.id}`,
      withBadBytes('{"description":"x","comment":"see ', '"}'),
    );
    expect(patch.status).toBe(400);
    expect(patch.body.error).toMatch(/^invalid body field comment: /);
    // Outside any string the bytes leave no JSON to name a field of.
    const outside = await send('POST', '/service-requests', withBadBytes('{"title":"x"', '}'));
    expect(outside).toEqual({ status: 400, body: { error: 'request body is not valid UTF-8', code: 'invalid_body' } });
    // Nor may a bad byte pair up with an escaped high surrogate before it.
    const paired = await send(
      'POST',
      '/service-requests',
      Buffer.concat([utf8('{"title":"\\ud83d'), Buffer.from([0xff]), utf8('"}')]),
    );
    expect(paired.status).toBe(400);
    expect(await storedWithReplacementCharacter()).toBe(0);
  });

  it('stores every other text exactly as sent: pairs, escapes, U+FFFD sent as such, a body after a byte order mark', async () => {
    const title = 'Kran 😀 \ud83d\ude00 Prüfung \ufffd 検査';
    const created = await createRequest(world, key, { title, description: 'é'.repeat(10) });
    sentReplacementCharacter.push(created.id);
    const escaped = await send('POST', '/service-requests', '{"title":"\\ud83d\\ude00 escaped"}');
    expect(escaped.status).toBe(201);
    expect(escaped.body.title).toBe('😀 escaped');
    const bom = await send(
      'POST',
      '/service-requests',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8('{"title":"après BOM"}')]),
    );
    expect(bom.status).toBe(201);
    expect(bom.body.title).toBe('après BOM');
    const { rows } = await world.db.pool.query('SELECT title FROM service_requests WHERE id = ANY($1::uuid[])', [
      [created.id, bom.body.id],
    ]);
    expect(rows.map((row) => row.title).sort()).toEqual([title, 'après BOM'].sort());
  });

  it('a query parameter that is not UTF-8 once decoded answers 400 naming it', async () => {
    for (const query of ['q=%ED%A0%80', 'q=abc%FF', 'status=new&q=%C3']) {
      const response = await world.api.external(`/service-requests?${query}`, key);
      expect(response.status, query).toBe(400);
      expect(await json(response), query).toEqual({
        error:
          'invalid query parameter q: must be well-formed UTF-8 text (no lone surrogate \\uD800–\\uDFFF, no invalid bytes)',
        code: 'invalid_parameter',
      });
    }
    await createRequest(world, key, { title: 'Bremsprüfung im Hafen' });
    const found = await world.api.external(`/service-requests?q=${encodeURIComponent('Bremsprüfung')}`, key);
    expect(found.status).toBe(200);
    expect((await json(found)).items.map((item: { title: string }) => item.title)).toEqual(['Bremsprüfung im Hafen']);
  });

  it('an Idempotency-Key whose bytes are not UTF-8 answers 400 naming the header, and nothing is created', async () => {
    const before = await world.db.pool.query('SELECT count(*)::int AS n FROM service_requests');
    const answer = await rawRequest(
      'POST',
      '/service-requests',
      // The UTF-8 encoding of a lone surrogate, sent as header bytes.
      { 'Content-Type': 'application/json', 'Idempotency-Key': 'key-\u00ed\u00a0\u0080' },
      utf8('{"title":"With a bad key"}'),
    );
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(/^invalid header Idempotency-Key: /);
    const after = await world.db.pool.query('SELECT count(*)::int AS n FROM service_requests');
    expect(after.rows[0].n).toBe(before.rows[0].n);
    const stored = await world.db.pool.query('SELECT count(*)::int AS n FROM idempotency_keys');
    expect(stored.rows[0].n).toBe(0);
  });

  describe('multipart uploads', () => {
    function upload(id: string, filename: Buffer, extra: Buffer = Buffer.alloc(0)) {
      const boundary = 'text-test-boundary';
      const body = Buffer.concat([
        extra.length > 0
          ? Buffer.concat([
              utf8(`--${boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\n`),
              extra,
              utf8('\r\n'),
            ])
          : Buffer.alloc(0),
        utf8(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="`),
        filename,
        utf8(`"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--${boundary}--\r\n`),
      ]);
      return rawRequest(
        'POST',
        `/service-requests/${id}/files`,
        {
          'Content-Type': `multipart/form-data; boundary=${boundary}`,
        },
        body,
      );
    }

    it('keeps a UTF-8 filename as sent', async () => {
      const created = await createRequest(world, key, { title: 'Photos' });
      const answer = await upload(created.id, utf8('Prüfbericht 検査.txt'));
      expect(answer.status).toBe(201);
      const files = await json(await world.api.external(`/service-requests/${created.id}/files`, key));
      expect(files.items.map((file: { filename: string }) => file.filename)).toEqual(['Prüfbericht 検査.txt']);
    });

    it('refuses a filename or a field whose bytes are not UTF-8 with 400 naming it, and stores no file', async () => {
      const created = await createRequest(world, key, { title: 'More photos' });
      const badName = await upload(created.id, withBadBytes('photo', '.txt'));
      expect(badName.status).toBe(400);
      expect(badName.body).toEqual({
        error:
          'invalid multipart body: the filename of part "file" must be well-formed UTF-8 text (no invalid bytes, no U+FFFD)',
        code: 'invalid_multipart',
      });
      const badField = await upload(created.id, utf8('photo.txt'), withBadBytes('seen ', ' today'));
      expect(badField.status).toBe(400);
      expect(badField.body.error).toBe(
        'invalid multipart body: the value of part "note" must be well-formed UTF-8 text (no invalid bytes, no U+FFFD)',
      );
      const files = await world.db.pool.query(
        'SELECT count(*)::int AS n FROM service_request_files WHERE service_request_id = $1',
        [created.id],
      );
      expect(files.rows[0].n).toBe(0);
      expect(await storedWithReplacementCharacter()).toBe(0);
    });
  });
});
