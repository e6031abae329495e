import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestApi, TEST_ADMIN_TOKEN, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

// The admin API's HTML reference at /api/admin/v1/docs: a public page, rendered like the
// external one, whose document and calls take the admin token.

const CHROMIUM = '/usr/bin/chromium';

let db: TestDatabase;
let api: TestApi;

beforeAll(async () => {
  db = await createTestDatabase('admin_reference');
  api = await startTestApi(db.pool, db.url);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('admin API reference page', () => {
  it('is served without a token, with scripts only from the API itself, and its document still needs the token', async () => {
    const page = await fetch(`${api.url}/api/admin/v1/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    const scripts = [...html.matchAll(/<script src="([^"]+)"/g)].map((match) => match[1]!);
    expect(scripts).toEqual([
      expect.stringMatching(/^\/api\/external\/v1\/docs\/assets\/swagger-ui-bundle\.js/),
      '/api/admin/v1/docs/assets/admin-reference.js',
    ]);
    for (const script of scripts) expect((await fetch(`${api.url}${script}`)).status).toBe(200);
    expect(html).toContain('data-spec-url="/api/admin/v1/openapi.json"');

    expect((await fetch(`${api.url}/api/admin/v1/openapi.json`)).status).toBe(401);
    const document = await api.admin('/openapi.json');
    expect(document.status).toBe(200);
    const paths = Object.keys((await json(document)).paths);
    expect(paths).toEqual(
      expect.arrayContaining(['/tenants', '/unknown-devices', '/unknown-devices/{deviceId}/register']),
    );
    // The page itself is not an operation of the document.
    expect(paths).not.toContain('/docs');
  });

  describe.runIf(existsSync(CHROMIUM))('in headless Chromium', () => {
    let browser: BrowserContext;
    let profile: string;
    beforeAll(async () => {
      profile = mkdtempSync(path.join(tmpdir(), 'gantry-chromium-'));
      browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        viewport: { width: 1280, height: 900 },
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
      });
    });
    afterAll(async () => {
      await browser?.close();
      if (profile) rmSync(profile, { recursive: true, force: true });
    });

    it('refuses a wrong token, then with the admin token lists the admin operations and a call made from it answers 200', async () => {
      const tenant = await json(await api.admin('/tenants', { method: 'POST', json: { name: 'Reference terminal' } }));
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(error.message));
      page.on('console', (message) => {
        if (message.type() === 'error' && !message.text().includes('401')) problems.push(message.text());
      });
      await page.goto(`${api.url}/api/admin/v1/docs`);
      await page.fill('#admin-token', 'not-the-admin-token-at-all');
      await page.click('#token-form button');
      await page.waitForFunction("document.getElementById('token-status').textContent.includes('refused')");

      await page.fill('#admin-token', TEST_ADMIN_TOKEN);
      await page.click('#token-form button');
      await page.waitForSelector('#operations-Admin-adminListTenants');
      const shown = await page.$$eval('.opblock-summary-path', (nodes) => nodes.map((node) => node.textContent));
      expect(shown).toEqual(expect.arrayContaining(['/tenants', '/unknown-devices']));

      await page.click('#operations-Admin-adminListTenants .opblock-summary-control');
      await page.click('#operations-Admin-adminListTenants .try-out__btn');
      await page.click('#operations-Admin-adminListTenants .execute');
      await page.waitForSelector(
        '#operations-Admin-adminListTenants .live-responses-table tr.response .response-col_status',
      );
      const status = await page
        .locator('#operations-Admin-adminListTenants .live-responses-table tr.response .response-col_status')
        .first()
        .textContent();
      expect(status?.trim()).toBe('200');
      const body = await page
        .locator('#operations-Admin-adminListTenants .live-responses-table .microlight')
        .first()
        .textContent();
      expect(body).toContain(tenant.id);
      expect(problems).toEqual([]);
      await page.close();
    }, 120_000);
  });
});
