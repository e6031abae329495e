import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { migrateDatabase } from '@gantry/db';
import { postgresBinDir, startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';
import { spawnService, type ServiceProcess } from '../support/processes.ts';

const ADMIN_TOKEN = 'database-unavailable-admin-token';

let server: PrivatePostgres | undefined;
let api: ServiceProcess | undefined;

afterAll(async () => {
  await api?.kill();
  await server?.destroy();
});

interface Answer {
  status: number;
  retryAfter: string | null;
  body: unknown;
}

async function listTenants(url: string): Promise<Answer> {
  const response = await fetch(`${url}/api/admin/v1/tenants`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    signal: AbortSignal.timeout(60_000),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: await response.json().catch(() => null),
  };
}

/** Asks until the answer is not `status` (a hang guard, not a timing assertion). */
async function askUntilNot(url: string, status: number): Promise<Answer> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const answer = await listTenants(url);
    if (answer.status !== status || Date.now() > deadline) return answer;
    await sleep(250);
  }
}

// What the API does while a failover leaves no primary: the database behind its one
// endpoint is a private PostgreSQL (the shared one is never stopped), stopped and
// started again under the built API process.
describe.skipIf(postgresBinDir() === null)('the API while its database is down', () => {
  it('answers 503 with Retry-After and a JSON error while PostgreSQL is stopped, and 200 again once it is back', async () => {
    server = await startPrivatePostgres();
    await migrateDatabase(server.url, { storageMode: 'postgres' });
    api = await spawnService('api', {
      env: { GANTRY_DATABASE_URL: server.url, GANTRY_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    expect((await listTenants(api.url)).status).toBe(200);

    await server.stop();
    const down = await askUntilNot(api.url, 200);
    expect(down.status).toBe(503);
    expect(Number(down.retryAfter)).toBeGreaterThan(0);
    expect(down.body).toMatchObject({ error: expect.any(String), code: 'database_unavailable' });
    // Every later answer during the outage is the same, connection by connection.
    const again = await listTenants(api.url);
    expect(again.status).toBe(503);

    await server.start();
    const back = await askUntilNot(api.url, 503);
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ items: expect.any(Array) });
    expect(api.child.exitCode).toBeNull();
  });
});
