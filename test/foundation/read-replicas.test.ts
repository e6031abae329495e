import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisioning } from '@gantry/api';
import { createOutbox, createPool, migrateDatabase } from '@gantry/db';
import { spawnService, type ServiceProcess } from '../support/processes.ts';
import { basebackupBinDir, startStreamingPair, type StreamingPair } from '../support/streaming-replica.ts';

// The API (built, its own process) with GANTRY_DATABASE_URL on a private primary and
// GANTRY_DATABASE_READ_URL on a hot standby streaming from it (pg_basebackup -R). What
// served a read is seen from the databases themselves: the replica's connections of
// the read pool (application_name gantry-api-reads) show the statement they ran, and a
// replica whose replay is paused answers without the newest commits.

const DATABASE = 'gantry_replica_test';
const available = basebackupBinDir() !== null;

let pair: StreamingPair | undefined;
let api: ServiceProcess | undefined;
/** A second API process with a lag bound of 1 s: a paused replay soon sends its reads to the primary. */
let strictApi: ServiceProcess | undefined;
let keyA = '';
let keyB = '';

beforeAll(async () => {
  if (!available) return;
  pair = await startStreamingPair(async (primary) => {
    const admin = new pg.Client({ connectionString: primary.url('postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${DATABASE}`);
    await admin.end();
    await migrateDatabase(primary.url(DATABASE), { storageMode: 'postgres' });
    const pool = createPool(primary.url(DATABASE), { max: 2 });
    try {
      const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
      const tenant = await provisioning.createTenant(deps, { name: 'Replica terminal' });
      keyA = (await provisioning.createApiKey(deps, tenant.id, { name: 'writer' })).key;
      keyB = (await provisioning.createApiKey(deps, tenant.id, { name: 'dashboard' })).key;
    } finally {
      await pool.end();
    }
  });
  const env = {
    GANTRY_DATABASE_URL: pair.primary.url(DATABASE),
    GANTRY_DATABASE_READ_URL: pair.replica.url(DATABASE),
    GANTRY_READ_LAG_CHECK_MS: '300',
  };
  // Generous, so a paused replay stays "fresh" however slow this machine is right now.
  api = await spawnService('api', { env: { ...env, GANTRY_READ_MAX_LAG_SECONDS: '600' } });
  strictApi = await spawnService('api', { env: { ...env, GANTRY_READ_MAX_LAG_SECONDS: '1' } });
});

afterAll(async () => {
  try {
    await Promise.all([api?.kill(), strictApi?.kill()]);
  } finally {
    await pair?.destroy();
  }
});

async function onReplica<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: pair!.replica.url(DATABASE) });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function call(key: string, method: string, path: string, body?: unknown, through = api!) {
  const response = await fetch(`${through.url}/api/external/v1${path}`, {
    method,
    headers: { 'X-API-Key': key, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: (await response.json()) as any };
}

const today = new Date().toISOString().slice(0, 10);
const metricsPath = `/telemetry/service-request-metrics?from=${today}&to=${today}&bucket=day`;

/** Service requests created today, as the service-request metrics (a replica read) count them. */
async function countedRequests(key: string, through = api!): Promise<number> {
  const { status, body } = await call(key, 'GET', metricsPath, undefined, through);
  expect(status).toBe(200);
  return body.items[0].totalCount;
}

async function readyz(through = api!) {
  const response = await fetch(`${through.url}/readyz`);
  return { status: response.status, body: (await response.json()) as any };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The statements the API's read pool last ran on the replica. */
async function replicaReadStatements(): Promise<string[]> {
  return onReplica(async (client) => {
    const { rows } = await client.query<{ query: string }>(
      `SELECT query FROM pg_stat_activity WHERE application_name = 'gantry-api-reads' AND datname = $1`,
      [DATABASE],
    );
    return rows.map((row) => row.query);
  });
}

async function metric(name: string): Promise<string[]> {
  const text = await (await fetch(`${api!.url}/metrics`)).text();
  return text.split('\n').filter((line) => line.startsWith(name));
}

describe.skipIf(!available)('reads on a streaming replica', () => {
  it('serves read-only routes from the replica, a key reads its own writes, and a stopped replica sends reads to the primary until it is back', async () => {
    const ready = await until('the replica to take reads', async () => {
      const { body } = await readyz();
      return body.databases.replica.readsTo === 'replica' ? body : undefined;
    });
    expect(ready.status).toBe('ready');
    expect(ready.databases.primary.endpoint).toBe(`127.0.0.1:${pair!.primary.port}/${DATABASE}`);
    expect(ready.databases.replica).toMatchObject({
      endpoint: `127.0.0.1:${pair!.replica.port}/${DATABASE}`,
      reachable: true,
      maxLagSeconds: 600,
    });
    expect(await metric('gantry_api_database_info')).toEqual(
      expect.arrayContaining([
        expect.stringContaining(`role="replica",endpoint="127.0.0.1:${pair!.replica.port}/${DATABASE}"`),
      ]),
    );
    expect((await metric('gantry_api_replica_lag_seconds'))[0]).toMatch(/^gantry_api_replica_lag_seconds \d/);

    // A read-only route runs its statement on the replica.
    expect(await countedRequests(keyB)).toBe(0);
    expect((await replicaReadStatements()).some((query) => query.includes('api:serviceRequestMetricsFleet'))).toBe(
      true,
    );
    // An export reads one snapshot on two connections: both on the replica.
    const exported = await fetch(
      `${api!.url}/api/external/v1/telemetry/service-request-metrics/export.csv?from=${today}&to=${today}`,
      {
        headers: { 'X-API-Key': keyB },
      },
    );
    expect(exported.status).toBe(200);
    expect(await exported.text()).toMatch(/^\uFEFF?"?bucketStart/);

    // The replica stops replaying: it still answers, with what it had. (Once it replayed a
    // commit, here the key check's last_used_at, it knows how fresh that is.)
    await until('the replica to replay a commit', () =>
      onReplica(async (client) => {
        const { rows } = await client.query('SELECT pg_last_xact_replay_timestamp() IS NOT NULL AS replayed');
        return rows[0].replayed ? true : undefined;
      }),
    );
    await onReplica((client) => client.query('SELECT pg_wal_replay_pause()'));
    await until('replay to pause', () =>
      onReplica(async (client) => {
        const { rows } = await client.query(`SELECT pg_get_wal_replay_pause_state() AS state`);
        return rows[0].state === 'paused' ? true : undefined;
      }),
    );
    const created = await call(keyA, 'POST', '/service-requests', { title: 'Hydraulic leak', priority: 'high' });
    expect(created.status).toBe(201);
    // The writer sees its write at once, on a service-request route and on a replica-read route…
    expect((await call(keyA, 'GET', `/service-requests/${created.body.id}`)).status).toBe(200);
    expect(await countedRequests(keyA)).toBe(1);
    // …while another key reads the paused replica, which has not replayed it.
    expect(await countedRequests(keyB)).toBe(0);
    // Freshness is the replica's own: as of its last replayed commit, before the write.
    const createdAt = Date.parse(created.body.createdAt);
    const quality = (key: string) => call(key, 'GET', `/telemetry/data-quality?from=${today}&to=${today}`);
    expect(Date.parse((await quality(keyB)).body.generatedAt)).toBeLessThan(createdAt);
    expect(Date.parse((await quality(keyA)).body.generatedAt)).toBeGreaterThanOrEqual(createdAt);

    // Past its lag bound the strict process reads the primary, for every key.
    const lagging = await until('the strict process to find the replica lagging', async () => {
      const { body } = await readyz(strictApi);
      return body.databases.replica.readsTo === 'primary' ? body.databases.replica : undefined;
    });
    expect(lagging).toMatchObject({ reachable: true, maxLagSeconds: 1 });
    expect(lagging.lagSeconds).toBeGreaterThan(1);
    expect(await countedRequests(keyB, strictApi)).toBe(1);

    await onReplica((client) => client.query('SELECT pg_wal_replay_resume()'));
    await until('the replica to replay the write', async () =>
      (await countedRequests(keyB)) === 1 ? true : undefined,
    );

    // The replica goes away: reads are answered by the primary, the first one included.
    await pair!.replica.stop();
    expect(await countedRequests(keyB)).toBe(1);
    const fallback = await until('readyz to show reads on the primary', async () => {
      const { status, body } = await readyz();
      return body.databases.replica.readsTo === 'primary' ? { status, body } : undefined;
    });
    expect(fallback.status).toBe(200);
    expect(fallback.body.status).toBe('ready');
    expect(fallback.body.databases.replica.reachable).toBe(false);
    expect(await countedRequests(keyB)).toBe(1);
    expect((await metric('gantry_api_replica_routed_reads_total{database="primary"}'))[0]).toMatch(/ [1-9]\d*$/);

    // Back: the replica takes reads again.
    await pair!.replica.start();
    await until('the replica to take reads again', async () =>
      (await readyz()).body.databases.replica.readsTo === 'replica' ? true : undefined,
    );
    expect(await countedRequests(keyB)).toBe(1);
    expect((await replicaReadStatements()).some((query) => query.includes('api:serviceRequestMetricsFleet'))).toBe(
      true,
    );
  });
});
