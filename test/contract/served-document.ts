import { loadConfig } from '@gantry/config';
import { createOutbox, type Pool } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { startApiServer, type ApiServer } from '@gantry/api';
import pg from 'pg';

export const ADMIN_TOKEN = 'contract-admin-token-0123456789';

/** The OpenAPI documents a running API serves (external and admin), as JSON values. */
export interface ServedDocuments {
  external: Record<string, unknown>;
  admin: Record<string, unknown>;
}

/**
 * The API on a free loopback port with no database: enough to serve the public external
 * document, the admin document (admin token only) and the answers made before any
 * query (404, 405, 415…). The pool points nowhere and is never connected.
 */
export async function startDatabaseFreeApi(): Promise<ApiServer> {
  const pool = new pg.Pool({ connectionString: 'postgres://gantry@127.0.0.1:1/unused' }) as unknown as Pool;
  const config = loadConfig({ GANTRY_ADMIN_TOKEN: ADMIN_TOKEN, GANTRY_LOG_LEVEL: 'silent', GANTRY_LOG_FORMAT: 'json' });
  const server = await startApiServer(
    { config, pool, logger: silentLogger(), outbox: createOutbox({ maxAttempts: 3 }), readiness: {} },
    { host: '127.0.0.1', port: 0 },
  );
  return {
    ...server,
    async close() {
      await server.close();
      await pool.end();
    },
  };
}

/** Fetches the two documents over HTTP, so what is checked is what a client downloads. */
export async function fetchServedDocuments(): Promise<ServedDocuments> {
  const server = await startDatabaseFreeApi();
  try {
    const get = async (path: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${server.url}${path}`, { headers });
      if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}`);
      return (await response.json()) as Record<string, unknown>;
    };
    return {
      external: await get('/api/external/v1/openapi.json'),
      admin: await get('/api/admin/v1/openapi.json', { Authorization: `Bearer ${ADMIN_TOKEN}` }),
    };
  } finally {
    await server.close();
  }
}
