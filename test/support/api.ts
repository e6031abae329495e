import { loadConfig, type Config } from '@gantry/config';
import { createOutbox, type Pool } from '@gantry/db';
import { silentLogger, type Logger } from '@gantry/logger';
import { startApiServer, type ApiServer } from '@gantry/api';
import { unwatchContract, watchContract } from './contract.ts';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

/** Configuration as a test deployment has it, with overrides by variable name. */
export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    GANTRY_DATABASE_URL: databaseUrl,
    GANTRY_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    GANTRY_LOG_LEVEL: 'silent',
    GANTRY_LOG_FORMAT: 'json',
    // Budgets no suite reaches, so tests are never throttled; rate-limit tests override them.
    GANTRY_RATE_LIMIT_PER_SECOND: '100000',
    GANTRY_RATE_LIMIT_BURST: '100000',
    GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE: '100000',
    ...env,
  });
}

export interface TestApi extends ApiServer {
  config: Config;
  /** fetch against the external API with a key (path relative to /api/external/v1). */
  external(path: string, key: string | null, init?: RequestInit): Promise<Response>;
  /** fetch against the admin API with the test admin token. */
  admin(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
}

/**
 * The API in-process on a free port. Every answer is checked twice: the server checks
 * each JSON body against its route's zod schema, and every answer a test receives
 * through fetch is checked against the OpenAPI documents this server serves
 * (test/support/contract.ts); a mismatch fails the test.
 */
export async function startTestApi(
  pool: Pool,
  databaseUrl: string,
  env: Record<string, string> = {},
  logger: Logger = silentLogger(),
): Promise<TestApi> {
  const config = testConfig(databaseUrl, env);
  const server = await startApiServer(
    {
      config,
      pool,
      logger,
      outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }),
      readiness: { database: async () => void (await pool.query('SELECT 1')) },
      validateResponses: true,
    },
    { host: '127.0.0.1', port: 0 },
  );
  watchContract(server.url, TEST_ADMIN_TOKEN);
  return {
    ...server,
    async close() {
      unwatchContract(server.url);
      await server.close();
    },
    config,
    external(path, key, init = {}) {
      const headers = new Headers(init.headers);
      if (key !== null) headers.set('X-API-Key', key);
      return fetch(`${server.url}/api/external/v1${path}`, { ...init, headers });
    },
    admin(path, init = {}) {
      const headers = new Headers(init.headers);
      headers.set('Authorization', `Bearer ${TEST_ADMIN_TOKEN}`);
      let body = init.body;
      if (init.json !== undefined) {
        headers.set('Content-Type', 'application/json');
        body = JSON.stringify(init.json);
      }
      return fetch(`${server.url}/api/admin/v1${path}`, { ...init, headers, body });
    },
  };
}

/** The JSON body of a response, loosely typed for assertions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function json(response: Response): Promise<any> {
  return response.json();
}
