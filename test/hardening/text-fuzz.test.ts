import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteSpec } from '../../services/api/src/http/route.ts';
import { basePaths } from '../../services/api/src/http/route.ts';
import { startTestApi, TEST_ADMIN_TOKEN, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';
import { inputJsonSchema, ValueGenerator, type JsonSchema } from './generate.ts';
import { inParallel, pick, registeredRoutes, seededRandom } from './support.ts';

// Text at the edge, fuzzed: valid requests with text in many scripts, random ones, and
// ones carrying a lone surrogate or bytes that are not UTF-8 in a JSON body, a query
// parameter, the Idempotency-Key header or a multipart filename, across the API's write
// and read routes. No answer may be a 5xx, every request carrying such text must get a
// 400 naming where it was, and afterwards no stored text may hold U+FFFD (nothing the
// requests sent held one). TEXT_FUZZ_SEED reproduces a run, TEXT_FUZZ_REQUESTS sizes it.
const SEED = Number(process.env.TEXT_FUZZ_SEED ?? 20261129);
const REQUESTS = Number(process.env.TEXT_FUZZ_REQUESTS ?? 10_000);

/** Well-formed text beyond ASCII, put into free-text fields of valid requests. */
const WELL_FORMED = [
  'Prüfbericht',
  'Kran 😀 Nord',
  '検査 済み',
  'Ωμέγα',
  'e\u0301 combining',
  '\ud83d\ude00 pair',
  'ﬁ ligature',
];
/** Lone surrogates, put into strings of a JSON body (JSON.stringify writes them as escapes). */
const LONE_SURROGATES = ['\ud800', 'abc\udfff', '\udc00x', 'pair broken \ud83d', '\ude00 reversed \ud83d'];
/** Byte runs that are not UTF-8: a surrogate's encoding, a stray byte, a truncated sequence, an overlong form. */
const BAD_BYTES = [[0xed, 0xa0, 0x80], [0xff], [0xc3], [0xe2, 0x82], [0xc0, 0xaf], [0xf5, 0x80, 0x80, 0x80]];
const FREE_TEXT = /title|description|comment|resolution|location|name|reason|externalRef|note/i;

type Kind = 'valid' | 'random' | 'body-surrogate' | 'body-bytes' | 'query' | 'header' | 'filename';
/** Kinds whose request carries ill-formed text: each must be answered 400 naming where. */
const INJECTED = new Set<Kind>(['body-surrogate', 'body-bytes', 'query', 'header', 'filename']);

interface Planned {
  kind: Kind;
  route: RouteSpec;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** For injected kinds: what the 400's error must name. */
  names?: string;
}

let db: TestDatabase;
let api: TestApi;
let tenant: TenantFixture;
let routes: RouteSpec[];
let dataDir: string;
const requestIds: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('text_fuzz');
  dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-text-fuzz-'));
  api = await startTestApi(db.pool, db.url, { GANTRY_DATA_DIR: dataDir });
  tenant = await createTenantWithKeys(db.pool, ['Acme']);
  // The write and read routes of text a client sends and reads back; file exports (a
  // workbook each) are left to the registry-wide fuzz.
  routes = (await registeredRoutes(db.pool, api.config)).filter(
    (route) => route.base !== 'root' && !/export\.(csv|xlsx)$/.test(route.path) && route.method !== 'delete',
  );
  for (let index = 0; index < 20; index++) {
    const response = await api.external('/service-requests', tenant.tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: `${pick(Math.random, WELL_FORMED)} ${index}`, customerName: 'Acme' }),
    });
    requestIds.push(((await response.json()) as { id: string }).id);
  }
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function joinPath(at: string, key: string | number): string {
  return typeof key === 'number' ? `${at}[${key}]` : at === '' ? key : `${at}.${key}`;
}

/** Where the strings of a JSON value are, as the API names them (`items[2].name`). */
function stringPaths(value: unknown, at = ''): { path: (string | number)[]; name: string }[] {
  if (typeof value === 'string') return [{ path: [], name: at }];
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((item, index) => [index, item])
    : value !== null && typeof value === 'object'
      ? Object.entries(value)
      : [];
  return entries.flatMap(([key, inner]) =>
    stringPaths(inner, joinPath(at, key)).map((found) => ({ path: [key, ...found.path], name: found.name })),
  );
}

function setAt(value: unknown, at: (string | number)[], replacement: unknown): unknown {
  if (at.length === 0) return replacement;
  const [key, ...rest] = at;
  (value as Record<string | number, unknown>)[key!] = setAt(
    (value as Record<string | number, unknown>)[key!],
    rest,
    replacement,
  );
  return value;
}

/** Puts well-formed non-ASCII text into the free-text fields of a generated value. */
function withWorldText(value: unknown, random: () => number): unknown {
  for (const { path: at, name } of stringPaths(value)) {
    if (FREE_TEXT.test(name) && random() < 0.6)
      setAt(value, at, `${pick(random, WELL_FORMED)} ${Math.floor(random() * 1000)}`);
  }
  return value;
}

const MARK = '\u0001mark\u0001';

function planRequest(route: RouteSpec, random: () => number, generator: ValueGenerator): Planned {
  const headers: Record<string, string> = {};
  if (route.auth === 'apiKey') headers['X-API-Key'] = tenant.tenantKey;
  if (route.auth === 'admin') headers.Authorization = `Bearer ${TEST_ADMIN_TOKEN}`;
  const jsonBody = route.request?.body !== undefined && route.method !== 'get';
  const multipart = route.request?.multipart;
  const declaresKey = route.request?.headers?.shape && 'Idempotency-Key' in route.request.headers.shape;
  const kinds: Kind[] = ['valid', 'valid', 'valid', 'random'];
  // A route that takes no query reads none of it, so only routes with one are checked.
  if (route.request?.query) kinds.push('query', 'query');
  if (jsonBody) kinds.push('body-surrogate', 'body-surrogate', 'body-bytes', 'body-bytes');
  if (declaresKey) kinds.push('header');
  if (multipart) kinds.push('filename', 'filename');
  const kind = pick(random, kinds);
  const planned: Planned = { kind, route, method: route.method.toUpperCase(), path: '', headers };

  const paramSchema =
    route.request?.params instanceof z.ZodObject ? (inputJsonSchema(route.request.params) as JsonSchema) : null;
  const routePath = route.path.replace(/:([A-Za-z0-9_]+)/g, (_whole, name: string) => {
    if (name === 'id' && route.path.startsWith('/service-requests')) return pick(random, requestIds);
    const property = paramSchema?.properties?.[name] ?? { type: 'string', format: 'uuid' };
    return encodeURIComponent(String(generator.valid(property, paramSchema ?? {}, name)));
  });

  // The query: generated from the schema, written out by hand so the bytes are what the plan says.
  const pairs: [string, string][] = [];
  const querySchema = route.request?.query ? inputJsonSchema(route.request.query) : null;
  if (querySchema?.properties) {
    const value = (generator.valid(querySchema, querySchema) ?? {}) as Record<string, unknown>;
    for (const [name, v] of Object.entries(value)) {
      const text = typeof v === 'string' ? v : JSON.stringify(v);
      pairs.push([name, encodeURIComponent(name === 'q' && kind === 'valid' ? pick(random, WELL_FORMED) : text)]);
    }
  }
  if (kind === 'random')
    pairs.push([
      pick(random, ['q', 'limit', 'from', 'unknown']),
      encodeURIComponent(generator.nastyString().replace(/[\ud800-\udfff]/g, '')),
    ]);
  if (kind === 'query') {
    const name = pairs.length > 0 && random() < 0.7 ? pick(random, pairs)[0] : pick(random, ['q', 'note', 'x']);
    const bad = pick(random, BAD_BYTES)
      .map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`)
      .join('');
    const at = pairs.findIndex(([existing]) => existing === name);
    const value = `${encodeURIComponent(pick(random, WELL_FORMED))}${bad}`;
    if (at >= 0) pairs[at] = [name, value];
    else pairs.push([name, value]);
    planned.names = `query parameter ${name}`;
  }
  const search = pairs.map(([name, value]) => `${encodeURIComponent(name)}=${value}`).join('&');
  planned.path = `${basePaths[route.base]}${routePath}${search ? `?${search}` : ''}`;

  if (jsonBody) {
    const schema = inputJsonSchema(route.request!.body!);
    let value = withWorldText(generator.valid(schema, schema), random);
    if (kind === 'random') {
      const names = Object.keys(schema.properties ?? {});
      if (value && typeof value === 'object' && names.length > 0)
        (value as Record<string, unknown>)[pick(random, names)] = generator.nastyJson();
      else value = generator.nastyJson();
    }
    let body = Buffer.from(JSON.stringify(value ?? {}));
    if (kind === 'body-surrogate' || kind === 'body-bytes') {
      if (value === null || typeof value !== 'object') value = {};
      const strings = stringPaths(value);
      const target = strings.length > 0 && random() < 0.8 ? pick(random, strings) : { path: ['note'], name: 'note' };
      setAt(value, target.path, kind === 'body-surrogate' ? pick(random, LONE_SURROGATES) : MARK);
      const text = JSON.stringify(value);
      if (kind === 'body-surrogate') body = Buffer.from(text);
      else {
        const [before, after] = text.split(JSON.stringify(MARK).slice(1, -1)) as [string, string];
        body = Buffer.concat([
          Buffer.from(`${before}x`),
          Buffer.from(pick(random, BAD_BYTES)),
          Buffer.from(`y${after}`),
        ]);
      }
      planned.names = `body field ${target.name}`;
    }
    headers['Content-Type'] = 'application/json';
    planned.body = body;
  }
  if (declaresKey) {
    if (kind === 'header') {
      // Header values go out as Latin-1, one byte a character: these are the bytes sent.
      headers['Idempotency-Key'] = `key-${String.fromCharCode(...pick(random, BAD_BYTES))}`;
      planned.names = 'header Idempotency-Key';
    } else if (random() < 0.3) headers['Idempotency-Key'] = `text-fuzz-${Math.floor(random() * 1e9)}`;
  }
  if (multipart) {
    const boundary = `textfuzz${Math.floor(random() * 1e9)}`;
    const filename =
      kind === 'filename'
        ? Buffer.concat([Buffer.from('photo '), Buffer.from(pick(random, BAD_BYTES)), Buffer.from('.txt')])
        : Buffer.from(`${pick(random, WELL_FORMED)}.txt`);
    headers['Content-Type'] = `multipart/form-data; boundary=${boundary}`;
    planned.body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${multipart.fileField}"; filename="`),
      filename,
      Buffer.from(`"\r\nContent-Type: text/plain\r\n\r\nfuzzed file\r\n--${boundary}--\r\n`),
    ]);
    if (kind === 'filename') planned.names = `filename of part "${multipart.fileField}"`;
  }
  return planned;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

function send(url: URL, request: Planned): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: request.method,
        path: request.path,
        headers: { ...request.headers, ...(request.body ? { 'Content-Length': String(request.body.length) } : {}) },
        agent,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        response.on('error', reject);
      },
    );
    outgoing.setTimeout(30_000, () => outgoing.destroy(new Error('no answer within 30 s')));
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}

/** Every text, varchar, json(b) and text-array column of the database, as `table.column`, holding U+FFFD. */
async function columnsHoldingReplacementCharacter(): Promise<string[]> {
  const { rows: columns } = await db.pool.query<{ table_name: string; column_name: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c
       JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
        AND c.udt_name IN ('text', 'varchar', 'bpchar', 'json', 'jsonb', '_text', '_varchar')`,
  );
  const found: string[] = [];
  for (const { table_name: table, column_name: column } of columns) {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${table}" WHERE "${column}"::text LIKE '%' || U&'\\FFFD' || '%'`,
    );
    if (rows[0]!.n > 0) found.push(`${table}.${column}: ${rows[0]!.n}`);
  }
  return found;
}

describe(`text at the edge, fuzzed (seed ${SEED})`, () => {
  it(`${REQUESTS} requests with valid, random and ill-formed text: no 5xx, a 400 naming each ill-formed text, no U+FFFD stored`, {
    timeout: 600_000,
  }, async () => {
    const random = seededRandom(SEED);
    const generator = new ValueGenerator(random, { uuids: requestIds });
    // Routes that take text in a body or an upload get four shares, reads one.
    const slots = [...routes]
      .sort((a, b) => a.operationId.localeCompare(b.operationId))
      .flatMap((route) => Array.from({ length: route.request?.body || route.request?.multipart ? 4 : 1 }, () => route));
    const plan = Array.from({ length: REQUESTS }, (_, index) =>
      planRequest(slots[index % slots.length]!, random, generator),
    );
    const url = new URL(api.url);
    const failures: string[] = [];
    const counts = new Map<string, number>();
    const started = Date.now();
    await inParallel(plan, 8, async (request) => {
      let outcome: { status: number; body: string };
      try {
        outcome = await send(url, request);
      } catch (error) {
        failures.push(`${request.kind} ${request.method} ${request.path.slice(0, 160)}: ${(error as Error).message}`);
        return;
      }
      const key = `${request.kind} ${outcome.status}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      const shown = `${request.route.operationId} [${request.kind}] ${request.method} ${request.path.slice(0, 160)}`;
      if (outcome.status >= 500) failures.push(`${shown} → ${outcome.status} ${outcome.body.slice(0, 200)}`);
      else if (INJECTED.has(request.kind)) {
        const error = (JSON.parse(outcome.body) as { error?: string }).error ?? '';
        if (outcome.status !== 400 || !error.includes(request.names!) || !error.includes('UTF-8'))
          failures.push(
            `${shown} → ${outcome.status} ${outcome.body.slice(0, 200)} (expected 400 naming ${request.names})`,
          );
      }
    });
    agent.destroy();
    console.info(
      `[text-fuzz] ${plan.length} requests in ${Math.round((Date.now() - started) / 1000)} s: ${JSON.stringify(Object.fromEntries([...counts].sort()))}`,
    );
    expect(failures.slice(0, 20)).toEqual([]);
    // Each kind ran, and valid writes were stored: the U+FFFD check below looks at real rows.
    for (const kind of ['valid', 'random', 'body-surrogate', 'body-bytes', 'query', 'header', 'filename'])
      expect(
        [...counts.keys()].some((key) => key.startsWith(`${kind} `)),
        kind,
      ).toBe(true);
    expect((counts.get('valid 201') ?? 0) + (counts.get('valid 200') ?? 0)).toBeGreaterThan(REQUESTS / 10);
    const stored = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM service_requests WHERE title ~ $1',
      ['[^\\x01-\\x7f]'],
    );
    expect(stored.rows[0]!.n).toBeGreaterThan(20);
    expect(await columnsHoldingReplacementCharacter()).toEqual([]);
  });
});
