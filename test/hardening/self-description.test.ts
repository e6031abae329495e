import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { chromium, type BrowserContext } from 'playwright-core';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateOpenApiDocument, openApiPath } from '../../services/api/src/features/docs/openapi.ts';
import { ratePolicies } from '../../services/api/src/http/rate-limit.ts';
import type { RouteSpec } from '../../services/api/src/http/route.ts';
import { json, startTestApi, TEST_ADMIN_TOKEN, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createTenantWithKeys } from '../support/fixtures.ts';
import { getWithRetry, registeredRoutes } from './support.ts';

const CHROMIUM = '/usr/bin/chromium';

let db: TestDatabase;
let api: TestApi;
let routes: RouteSpec[];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let document: any;

/** External routes that the OpenAPI document must describe. */
const published = () => routes.filter((route) => route.base === 'external' && !route.hidden);

beforeAll(async () => {
  db = await createTestDatabase('self_description');
  api = await startTestApi(db.pool, db.url);
  routes = await registeredRoutes(db.pool, api.config);
  const response = await getWithRetry(`${api.url}/api/external/v1/openapi.json`);
  expect(response.status).toBe(200);
  document = await response.json();
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('GET /openapi.json (spec: Self-description, Versioning)', () => {
  it('is a valid OpenAPI 3.0.3 document with API version 1.0.0, served without a key', async () => {
    expect(document.openapi).toBe('3.0.3');
    expect(document.info.version).toBe('1.0.0');
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('converts the schemas of every registered route (no route left without schemas)', () => {
    const generated = generateOpenApiDocument(routes, {
      base: 'external',
      policies: ratePolicies(api.config.rateLimit),
      limits: { maxJsonBytes: api.config.http.maxJsonBytes, maxUploadBytes: api.config.http.maxUploadBytes },
    });
    expect(generated.problems).toEqual([]);
  });

  it('describes every external route of the registry with its operationId, parameters and responses', () => {
    expect(published().length).toBeGreaterThan(5);
    for (const route of published()) {
      const operation = document.paths[openApiPath(route)]?.[route.method];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(operation.operationId).toBe(route.operationId);
      expect(Boolean(operation.deprecated)).toBe(Boolean(route.deprecated));
      const parameters: { name: string; in: string }[] = operation.parameters ?? [];
      for (const [location, schema] of [
        ['query', route.request?.query],
        ['path', route.request?.params],
      ] as const) {
        if (!(schema instanceof z.ZodObject)) continue;
        for (const name of Object.keys(schema.shape)) {
          expect(parameters, `${route.operationId} ${location} ${name}`).toContainEqual(
            expect.objectContaining({ name, in: location }),
          );
        }
      }
      for (const name of route.path.match(/:([A-Za-z0-9_]+)/g) ?? []) {
        expect(parameters).toContainEqual(expect.objectContaining({ name: name.slice(1), in: 'path', required: true }));
      }
      if (route.request?.body) expect(Object.keys(operation.requestBody.content)).toEqual(['application/json']);
      if (route.request?.multipart) {
        expect(operation.requestBody.content['multipart/form-data'].schema.required).toEqual([
          route.request.multipart.fileField,
        ]);
      }
      for (const [status, spec] of Object.entries(route.responses)) {
        const response = operation.responses[status];
        expect(response, `${route.operationId} ${status}`).toBeDefined();
        const contentType = spec.contentType ?? (spec.schema ? 'application/json' : undefined);
        if (contentType) expect(Object.keys(response.content ?? {})).toContain(contentType);
        for (const header of Object.keys(spec.headers ?? {}))
          expect(Object.keys(response.headers ?? {})).toContain(header);
      }
    }
  });

  it('names the X-API-Key scheme, requires it on keyed routes and not on public ones', () => {
    expect(document.components.securitySchemes.ApiKeyAuth).toEqual(
      expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-API-Key' }),
    );
    for (const route of published()) {
      const operation = document.paths[openApiPath(route)][route.method];
      expect(operation.security, route.operationId).toEqual(route.auth === 'apiKey' ? [{ ApiKeyAuth: [] }] : []);
      if (route.auth === 'apiKey') {
        for (const status of ['401', '429'])
          expect(operation.responses[status].content['application/json'].schema).toEqual({
            $ref: '#/components/schemas/ErrorResponse',
          });
        expect(Object.keys(operation.responses['429'].headers)).toEqual(
          expect.arrayContaining(['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']),
        );
      }
    }
  });

  it('turns every schema named with .meta({ id }) into a component', () => {
    const named = new Set<string>();
    for (const route of published()) {
      for (const spec of Object.values(route.responses)) {
        const id = spec.schema ? z.globalRegistry.get(spec.schema)?.id : undefined;
        if (id) named.add(id);
      }
      const body = route.request?.body ? z.globalRegistry.get(route.request.body)?.id : undefined;
      if (body) named.add(body);
    }
    expect(named.size).toBeGreaterThan(1);
    expect(Object.keys(document.components.schemas)).toEqual(expect.arrayContaining([...named]));
  });

  it('lists the self-description pages as public operations, the deprecated ones flagged', () => {
    expect(document.paths['/guide'].get.responses['200'].content).toHaveProperty('text/html');
    expect(document.paths['/docs'].get.responses['200'].content).toHaveProperty('text/html');
    expect(document.paths['/'].get.deprecated).toBe(true);
    expect(document.paths['/public-docs'].get.deprecated).toBe(true);
    expect(document.servers).toEqual([{ url: '/api/external/v1' }]);
  });

  it('serves the admin API its own document behind the admin token', async () => {
    expect((await getWithRetry(`${api.url}/api/admin/v1/openapi.json`)).status).toBe(401);
    const admin = await json(
      await getWithRetry(`${api.url}/api/admin/v1/openapi.json`, {
        headers: { Authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      }),
    );
    expect((await new Validator().validate(admin)).valid).toBe(true);
    expect(admin.components.securitySchemes.AdminToken).toEqual(
      expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    );
    for (const route of routes.filter((r) => r.base === 'admin' && !r.hidden)) {
      expect(admin.paths[openApiPath(route)]?.[route.method]?.operationId).toBe(route.operationId);
    }
    expect(Object.keys(admin.paths)).not.toContain('/me');
  });
});

describe('HTML pages (spec: Self-description)', () => {
  const external = (suffix: string) => getWithRetry(`${api.url}/api/external/v1${suffix}`);

  it('GET /guide is public HTML with a strict Content-Security-Policy and the first call with /me', async () => {
    const response = await external('/guide');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    const page = await response.text();
    expect(page).toContain(`curl -s &quot;$GANTRY_URL/me&quot; -H &quot;X-API-Key: $GANTRY_KEY&quot;`);
    expect(page).toContain(`export GANTRY_URL=${api.url}/api/external/v1`);
    for (const topic of [
      'Keys and scope',
      'Time ranges',
      'Paging',
      'Exports',
      'X-Export-Truncated',
      'gold or live',
      'aggregateRefresh',
      'X-Service-Signature',
      'timingSafeEqual',
      'gantry/v1/devices/{deviceId}/{type}',
      'Errors',
      'Limits',
      'Retry-After',
    ]) {
      expect(page, topic).toContain(topic);
    }
    expect(page).not.toMatch(/<script/i);
  });

  it('the guide shows the configured rate limits and lists every external endpoint', async () => {
    const page = await (await external('/guide')).text();
    const policy = ratePolicies(api.config.rateLimit).default;
    expect(page).toContain(`${policy.points} per ${policy.windowSeconds} s window`);
    for (const route of published())
      expect(page, route.operationId).toContain(`<code>${openApiPath(route).replace(/&/g, '&amp;')}</code>`);
  });

  it.each(['', '/', '/public-docs'])(
    'deprecated GET %s serves the guide with Deprecation and a Link to /guide',
    async (suffix) => {
      const response = await external(suffix);
      expect(response.status).toBe(200);
      expect(response.headers.get('deprecation')).toMatch(/^@\d+$/);
      expect(response.headers.get('link')).toBe('</api/external/v1/guide>; rel="successor-version"');
      expect(await response.text()).toContain('Your first call');
    },
  );

  it('GET /docs loads the reference from the API itself: no CDN, scripts only from self', async () => {
    const response = await external('/docs');
    expect(response.status).toBe(200);
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/unsafe-(inline|eval)/);
    const page = await response.text();
    const sources = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(sources.filter((source) => /^(https?:)?\/\//.test(source))).toEqual([]);
    for (const source of sources.filter((s) => s.startsWith('/api/external/v1/docs/assets/'))) {
      const asset = await getWithRetry(`${api.url}${source}`);
      expect(asset.status, source).toBe(200);
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
  });

  it('refuses an unknown asset name with a 400 naming the parameter', async () => {
    const response = await external('/docs/assets/..%2F..%2Fpackage.json');
    expect(response.status).toBe(400);
    expect((await json(response)).error).toMatch(/file/);
  });
});

describe('the pages in headless Chromium', () => {
  const hasChromium = existsSync(CHROMIUM);
  let browser: BrowserContext | undefined;
  let profile: string;
  let shots: string;

  beforeAll(async () => {
    if (!hasChromium) {
      console.warn(
        `[self-description] ${CHROMIUM} is absent (Debian package "chromium"): the browser checks are skipped`,
      );
      return;
    }
    profile = mkdtempSync(path.join(tmpdir(), 'gantry-chromium-'));
    // Overwritten on each run, so the latest screenshots can be looked at.
    shots = path.join(tmpdir(), 'gantry-screenshots');
    mkdirSync(shots, { recursive: true });
    // A fresh profile directory per run (launchPersistentContext is how playwright takes one).
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      viewport: { width: 1280, height: 900 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it.skipIf(!hasChromium)('the reference renders every path of the document, with no CSP violation', async () => {
    const page = await browser!.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`${api.url}/api/external/v1/docs`);
    await page.waitForSelector('.opblock-summary-path');
    const operations = Object.values(document.paths).reduce(
      (count: number, item) => count + Object.keys(item as object).length,
      0,
    );
    await page.waitForFunction((expected) => document.querySelectorAll('.opblock').length >= expected, operations);
    // Deprecated operations get a class of their own (struck-through path).
    const shown = await page.$$eval('.opblock-summary-path, .opblock-summary-path__deprecated', (nodes) =>
      nodes.map((node) => node.getAttribute('data-path') ?? node.textContent?.replace(/\u200b/g, '').trim()),
    );
    expect(Object.keys(document.paths).filter((p) => !shown.includes(p))).toEqual([]);
    const file = path.join(shots, 'reference.png');
    await page.screenshot({ path: file, fullPage: false });
    expect(statSync(file).size).toBeGreaterThan(10_000);
    expect(problems).toEqual([]);
    await page.close();
  });

  it.skipIf(!hasChromium)(
    'the reference calls the API itself: authorize with a key, try GET /me, see 200',
    async () => {
      const tenant = await createTenantWithKeys(db.pool, [], 'Reference tenant');
      const page = await browser!.newPage();
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      await page.goto(`${api.url}/api/external/v1/docs`);
      await page.click('button.authorize');
      await page.fill('.auth-container input[type=text], .auth-container input[type=password]', tenant.tenantKey);
      await page.click('.auth-btn-wrapper button.authorize');
      await page.click('.auth-btn-wrapper button.btn-done');
      await page.click('#operations-Key_and_scope-getMe .opblock-summary-control');
      await page.click('#operations-Key_and_scope-getMe .try-out__btn');
      await page.click('#operations-Key_and_scope-getMe .execute');
      const status = page
        .locator('#operations-Key_and_scope-getMe .live-responses-table tbody .response-col_status')
        .first();
      await status.waitFor();
      expect((await status.textContent())?.trim()).toBe('200');
      expect(
        await page.locator('#operations-Key_and_scope-getMe .live-responses-table .microlight').first().textContent(),
      ).toContain('Reference tenant');
      await page.screenshot({ path: path.join(shots, 'reference-try-it-out.png') });
      expect(problems).toEqual([]);
      await page.close();
    },
  );

  it.skipIf(!hasChromium)('the guide renders with its table of contents and no CSP violation', async () => {
    const page = await browser!.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    await page.goto(`${api.url}/api/external/v1/guide`);
    expect(await page.textContent('h1')).toContain('Gantry external API');
    const contents = await page.$$eval('nav.contents li a', (links) => links.map((link) => link.textContent));
    expect(contents).toEqual(expect.arrayContaining(['Your first call', 'Keys and scope', 'Webhooks', 'Limits']));
    // The stylesheet applied: the contents sit beside the text, not above it.
    const nav = await page.locator('nav.contents').boundingBox();
    const main = await page.locator('main.guide').boundingBox();
    expect(nav!.x + nav!.width).toBeLessThanOrEqual(main!.x + 1);
    const file = path.join(shots, 'guide.png');
    await page.screenshot({ path: file });
    expect(statSync(file).size).toBeGreaterThan(10_000);
    expect(problems).toEqual([]);
    await page.close();
  });
});
