/**
 * pnpm bench:reporting — the Reporting API on 100,000 assets, 1,000,000 inspections and
 * 1,000,000 reports, over real HTTP with concurrent clients.
 *
 * Seeds a dedicated database (gantry_bench_reporting) once with generate_series under
 * session_replication_role = replica (triggers off), builds the big tables' indexes after
 * the load, recomputes the reporting rollups (reporting_rebuild) and the assets' derived
 * fields in one pass, and ANALYZEs. The API runs as its own process (main.ts).
 * Later runs reuse the seed (a marker in gantry_meta); --reseed rebuilds it, --drop
 * removes the database at the end.
 *
 * Prints p50/p95/p99 per scenario next to its target (overview p95 < 100 ms, lists and
 * search p95 < 50 ms). Environment: GANTRY_BENCH_DATABASE_URL (server to use),
 * GANTRY_BENCH_CONCURRENCY (default 8), GANTRY_BENCH_REQUESTS (per scenario, default 200).
 *
 * --replica: the same seed on a private primary with a streaming replica (pg_basebackup
 * -R, both on free loopback ports, removed at the end), and the scenarios run twice in
 * one run: the API on the primary alone, then with GANTRY_DATABASE_READ_URL on the
 * replica. Prints the CPU time the primary's (and the replica's) PostgreSQL processes
 * spent during each pass, read from /proc, beside the load average.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { provisioning } from '@gantry/api';
import { createOutbox, createPool, migrateDatabase, type Pool } from '@gantry/db';
import { benchServerUrl, onServer as onTestServer, withDatabase } from '../support/database-url.ts';
import { nodeArguments } from '../support/processes.ts';
import { type Cluster, startStreamingPair } from '../support/streaming-replica.ts';
import { postgresCpuSeconds } from './postgres-cpu.ts';

const onServer = <T>(fn: (client: pg.Client) => Promise<T>) => onTestServer(fn, benchServerUrl());

const SEED_VERSION = 'reporting-bench-v4';
const DATABASE = 'gantry_bench_reporting';
const ASSETS = 100_000;
const INSPECTIONS = 1_000_000;
const SERVICE_REQUESTS = 20_000;
const DAYS = 730;
const CONCURRENCY = Number(process.env.GANTRY_BENCH_CONCURRENCY ?? 8);
const REQUESTS = Number(process.env.GANTRY_BENCH_REQUESTS ?? 200);
const args = new Set(process.argv.slice(2));

function log(message: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await fn();
  log(`${label}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return result;
}

interface Seed {
  tenantId: string;
  tenantKey: string;
  bigCustomerKey: string;
  customerKey: string;
  now: string;
}

async function seed(pool: Pool): Promise<Seed> {
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name: 'Bench terminal' });
  const t = tenant.id;
  const tenantKey = (await provisioning.createApiKey(deps, t, { name: 'bench tenant key' })).key;
  const bigCustomerKey = (
    await provisioning.createApiKey(deps, t, { name: 'bench big customer', customerName: 'Big Customer' })
  ).key;
  const customerKey = (
    await provisioning.createApiKey(deps, t, { name: 'bench customer', customerName: 'Customer 042' })
  ).key;
  const now = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000).toISOString();

  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query(`SET LOCAL work_mem = '256MB'`);
    await timed('asset types, templates', async () => {
      await client.query(
        `INSERT INTO asset_types (tenant_id, name, description)
         SELECT $1, 'Type ' || lpad(g::text, 2, '0'), 'Machine type ' || g FROM generate_series(1, 10) g`,
        [t],
      );
      await client.query(
        `INSERT INTO templates (tenant_id, name, asset_type_ids)
         SELECT $1, 'Template ' || lpad(g::text, 2, '0'), ARRAY(SELECT id FROM asset_types WHERE tenant_id = $1 ORDER BY name LIMIT 1 OFFSET (g % 10))
           FROM generate_series(1, 20) g`,
        [t],
      );
    });
    // One customer in ten is the same big customer (10,000 assets); the rest spread over 180.
    await timed(`${ASSETS.toLocaleString('en')} assets and devices`, async () => {
      await client.query(
        `INSERT INTO assets (tenant_id, asset_type_id, name, identifier, display_code, location, customer_name,
                             lifecycle_status, operational_status, external_ref, created_at, updated_at)
         SELECT $1, ty.id, ty.name || ' ' || g, 'AS-' || lpad(g::text, 6, '0'), 'A' || g, 'Yard ' || (g % 40),
                CASE WHEN g % 10 = 0 THEN 'Big Customer' ELSE 'Customer ' || lpad((g % 180 + 1)::text, 3, '0') END,
                CASE WHEN g % 20 = 0 THEN 'retired' ELSE 'active' END,
                CASE WHEN g % 17 = 0 THEN 'out_of_service' ELSE 'operational' END,
                'ERP-' || g, $2::timestamptz - interval '800 days', $2::timestamptz - interval '800 days'
           FROM generate_series(1, $3::int) g
           JOIN (SELECT id, name, row_number() OVER (ORDER BY name) - 1 AS n FROM asset_types WHERE tenant_id = $1) ty ON ty.n = g % 10`,
        [t, now, ASSETS],
      );
      await client.query(
        `CREATE TEMP TABLE bench_assets ON COMMIT DROP AS
         SELECT row_number() OVER (ORDER BY identifier)::int AS n, id, customer_name FROM assets WHERE tenant_id = $1`,
        [t],
      );
      await client.query('CREATE UNIQUE INDEX ON bench_assets (n)');
      await client.query(
        `INSERT INTO devices (tenant_id, device_id, asset_id, display_name)
         SELECT $1, 'trk-' || lpad(n::text, 6, '0'), id, 'Tracker ' || n FROM bench_assets`,
        [t],
      );
    });
    // Secondary indexes of the big tables are built once after the load, not row by row.
    const { rows: indexes } = await client.query<{ name: string; definition: string }>(
      `SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition
         FROM pg_index WHERE indrelid IN ('inspections'::regclass, 'reports'::regclass) AND NOT indisprimary`,
    );
    for (const index of indexes) await client.query(`DROP INDEX ${index.name}`);
    await client.query(
      `CREATE TEMP TABLE bench_templates ON COMMIT DROP AS
       SELECT row_number() OVER (ORDER BY name)::int - 1 AS n, id FROM templates WHERE tenant_id = $1`,
      [t],
    );
    // Inspections spread evenly over the last two years; the customer and latest-report
    // columns are written here so the rebuild below has only rollups to compute.
    await timed(`${INSPECTIONS.toLocaleString('en')} inspections`, () =>
      client.query(
        `INSERT INTO inspections (tenant_id, asset_id, template_id, template_version, status, started_at, completed_at,
                                  inspector_name, operator_identifier, external_ref, media, created_at, updated_at,
                                  customer_name, report_outcome, report_impact, report_count)
         SELECT $1, a.id, tp.id, 1, s.status, s.at - interval '20 minutes',
                CASE WHEN s.status = 'in_progress' THEN NULL ELSE s.at END,
                'Inspector ' || (k % 50), 'OP-' || lpad((k % 5000)::text, 5, '0'), 'INS-' || k,
                jsonb_build_object('photos', k % 5, 'documents', k % 2), s.at, s.at,
                a.customer_name,
                CASE WHEN s.status = 'in_progress' THEN '' WHEN s.status = 'rejected' OR k % 40 = 3 THEN 'rejected' ELSE 'completed' END,
                CASE WHEN s.status = 'in_progress' THEN '' WHEN k % 33 = 0 THEN 'out_of_service' WHEN k % 10 = 0 THEN 'warning' ELSE 'none' END,
                CASE WHEN s.status = 'in_progress' THEN 0 WHEN k % 50 = 2 THEN 2 ELSE 1 END
           FROM generate_series(1, $3::int) k
           CROSS JOIN LATERAL (
             SELECT $2::timestamptz - interval '${DAYS} days' + (k::float8 / $3::int) * interval '${DAYS} days' + (k % 97) * interval '1 minute' AS at,
                    CASE WHEN k % 25 = 0 THEN 'rejected' WHEN k % 50 = 1 THEN 'in_progress' ELSE 'completed' END AS status
           ) s
           JOIN bench_assets a ON a.n = (k::bigint * 48271) % $4::int + 1
           JOIN bench_templates tp ON tp.n = k % 20`,
        [t, now, INSPECTIONS, ASSETS],
      ),
    );
    // One report per finished inspection and a second (earlier) one for one in fifty: 1,000,000.
    await timed('1,000,000 reports', () =>
      client.query(
        `INSERT INTO reports (tenant_id, inspection_id, asset_id, template_id, impact, outcome, rejection_reason,
                              external_ref, media, created_at, updated_at, customer_name)
         SELECT i.tenant_id, i.id, i.asset_id, i.template_id,
                CASE WHEN r.second THEN 'warning' ELSE i.report_impact END,
                CASE WHEN r.second THEN 'completed' ELSE i.report_outcome END,
                CASE WHEN NOT r.second AND i.report_outcome = 'rejected' THEN 'Hydraulic leak' ELSE '' END,
                'REP-' || i.external_ref, '{"photos": 1}'::jsonb,
                i.completed_at + CASE WHEN r.second THEN interval '10 minutes' ELSE interval '30 minutes' END,
                i.completed_at, i.customer_name
           FROM inspections i
           CROSS JOIN LATERAL (VALUES (false), (true)) AS r (second)
          WHERE i.tenant_id = $1 AND i.status <> 'in_progress' AND (NOT r.second OR i.report_count = 2)`,
        [t],
      ),
    );
    await timed(`${SERVICE_REQUESTS.toLocaleString('en')} service requests`, () =>
      client.query(
        `INSERT INTO service_requests (tenant_id, seq, display_code, title, category, priority, status, asset_id, customer_name,
                                       cancel_reason, created_at, updated_at)
         SELECT $1, k, 'SR-' || lpad(k::text, 6, '0'), 'Request ' || k,
                (ARRAY['defect', 'maintenance_request', 'safety', 'cleaning', 'access', 'other'])[k % 6 + 1],
                (ARRAY['low', 'normal', 'normal', 'high', 'urgent'])[k % 5 + 1],
                (ARRAY['new', 'triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed', 'cancelled', 'closed'])[k % 8 + 1],
                a.id, a.customer_name,
                CASE WHEN k % 8 = 6 THEN (ARRAY['Duplicate', 'Not reproducible', 'Customer withdrew'])[k % 3 + 1] END,
                $2::timestamptz - (k % ${DAYS}) * interval '1 day', $2::timestamptz - (k % ${DAYS}) * interval '1 day'
           FROM generate_series(1, $3::int) k
           JOIN bench_assets a ON a.n = (k * 7919) % ${ASSETS} + 1`,
        [t, now, SERVICE_REQUESTS],
      ),
    );
    await client.query(`INSERT INTO service_request_counters (tenant_id, last_seq) VALUES ($1, $2)`, [
      t,
      SERVICE_REQUESTS,
    ]);
    await timed(`${indexes.length} indexes of inspections and reports`, async () => {
      for (const index of indexes) await client.query(index.definition);
    });
    await timed('reporting_rebuild (rollups)', () => client.query('SELECT reporting_rebuild($1)', [t]));
    await timed('asset derived fields', () =>
      client.query(
        `UPDATE assets a SET inspection_count = coalesce(i.cnt, 0), latest_inspection_at = i.latest,
                             report_count = coalesce(r.cnt, 0), latest_report_at = r.latest,
                             latest_impact = coalesce(r.impact, ''), latest_outcome = coalesce(r.outcome, '')
           FROM assets a2
           LEFT JOIN (SELECT asset_id, count(*)::int AS cnt, max(occurred_at) AS latest FROM inspections WHERE tenant_id = $1 GROUP BY 1) i ON i.asset_id = a2.id
           LEFT JOIN (SELECT DISTINCT ON (asset_id) asset_id, count(*) OVER (PARTITION BY asset_id)::int AS cnt,
                             max(created_at) OVER (PARTITION BY asset_id) AS latest, impact, outcome
                        FROM reports WHERE tenant_id = $1 ORDER BY asset_id, created_at DESC, id DESC) r ON r.asset_id = a2.id
          WHERE a.id = a2.id AND a2.tenant_id = $1`,
        [t],
      ),
    );
    await client.query(
      `INSERT INTO gantry_meta (key, value) VALUES ('bench_reporting_seed', $1::jsonb)
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      [JSON.stringify({ version: SEED_VERSION, tenantId: t, tenantKey, bigCustomerKey, customerKey, now })],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
  await timed('VACUUM ANALYZE', () => pool.query('VACUUM ANALYZE'));
  return { tenantId: t, tenantKey, bigCustomerKey, customerKey, now };
}

async function prepare(): Promise<{ pool: Pool; url: string; seeded: Seed }> {
  const url = withDatabase(benchServerUrl(), DATABASE);
  if (args.has('--reseed'))
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
  const exists = await onServer(
    async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE])).rowCount === 1,
  );
  if (!exists) await onServer((client) => client.query(`CREATE DATABASE ${DATABASE}`));
  await migrateDatabase(url, { storageMode: 'postgres' });
  const pool = createPool(url, { max: 20, applicationName: 'gantry-bench' });
  const { rows } = await pool.query<{ value: Seed & { version: string } }>(
    `SELECT value FROM gantry_meta WHERE key = 'bench_reporting_seed'`,
  );
  const existing = rows[0]?.value;
  if (existing?.version === SEED_VERSION) {
    log(`reusing the seed in ${DATABASE} (--reseed to rebuild it)`);
    return { pool, url, seeded: existing };
  }
  if (existing || (await pool.query('SELECT 1 FROM tenants LIMIT 1')).rowCount) {
    await pool.end();
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
    return prepare();
  }
  log(`seeding ${DATABASE}`);
  return { pool, url, seeded: await timed('seed total', () => seed(pool)) };
}

// Load generation ---------------------------------------------------------------------------

interface Scenario {
  name: string;
  target: number;
  key: string;
  path: (index: number) => string;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

async function runScenario(baseUrl: string, scenario: Scenario) {
  const call = async (index: number) => {
    const started = performance.now();
    const response = await fetch(`${baseUrl}/api/external/v1${scenario.path(index)}`, {
      headers: { 'X-API-Key': scenario.key },
    });
    await response.arrayBuffer();
    if (response.status !== 200)
      throw new Error(`${scenario.name}: ${scenario.path(index)} answered ${response.status}`);
    return performance.now() - started;
  };
  for (let index = 0; index < CONCURRENCY * 2; index += 1) await call(-1 - index);
  const durations: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        const index = next;
        next += 1;
        durations.push(await call(index));
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  durations.sort((a, b) => a - b);
  return {
    p50: percentile(durations, 50),
    p95: percentile(durations, 95),
    p99: percentile(durations, 99),
    rps: REQUESTS / elapsed,
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url: string, api: ChildProcess): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (api.exitCode !== null) throw new Error(`the API exited with ${api.exitCode}`);
    const ok = await fetch(`${url}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error('the API did not become healthy');
}

/** A deterministic spread of values for request i. */
function spread(index: number, modulo: number): number {
  return Math.abs((index * 2_654_435_761) % modulo);
}

async function main(): Promise<void> {
  if (args.has('--replica')) return compareWithReplica();
  const { pool, url, seeded } = await prepare();
  const counts = (
    await pool.query<{ assets: number; inspections: number; reports: number }>(
      `SELECT (SELECT count(*)::int FROM assets) AS assets, (SELECT count(*)::int FROM inspections) AS inspections, (SELECT count(*)::int FROM reports) AS reports`,
    )
  ).rows[0];
  log(`data: ${counts?.assets} assets, ${counts?.inspections} inspections, ${counts?.reports} reports`);

  const { api, url: baseUrl } = await startApi(url);
  const results = await runScenarios(baseUrl, scenariosOf(seeded));
  process.stdout.write(
    `\n${results.join('\n')}\n\nIndicative figures: the machine is shared; see docs/reporting.md for the conditions.\n`,
  );

  api.kill('SIGTERM');
  await once(api, 'exit');
  await pool.end();
  if (args.has('--drop')) await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
}

/**
 * The API as its own process (services/api/dist/main.js), as deployed, so the load
 * generator here does not share its event loop; `readUrl` adds a read replica.
 */
async function startApi(url: string, readUrl?: string): Promise<{ api: ChildProcess; url: string }> {
  const port = await freePort();
  const api = spawn(process.execPath, nodeArguments('api'), {
    cwd: new URL('../..', import.meta.url).pathname,
    env: {
      ...process.env,
      GANTRY_DATABASE_URL: url,
      ...(readUrl ? { GANTRY_DATABASE_READ_URL: readUrl } : {}),
      GANTRY_HOST: '127.0.0.1',
      GANTRY_PORT: String(port),
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_DB_POOL_SIZE: '20',
      GANTRY_RATE_LIMIT_PER_SECOND: '1000000',
      GANTRY_RATE_LIMIT_BURST: '1000000',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForHealth(baseUrl, api);
  return { api, url: baseUrl };
}

function scenariosOf(seeded: Seed): Scenario[] {
  const yearTo = seeded.now.slice(0, 10);
  const yearFrom = new Date(Date.parse(seeded.now) - 365 * 86_400_000).toISOString().slice(0, 10);
  const year = `from=${yearFrom}&to=${yearTo}`;
  const pad = (value: number, width: number) => String(value).padStart(width, '0');
  const scenarios: Scenario[] = [
    // Calibration: the cost of HTTP, the key check and the rate limiter alone on this machine now.
    { name: 'floor: GET /me (no reporting work)', target: 50, key: seeded.tenantKey, path: () => '/me' },
    {
      name: 'overview, 1 year, tenant key',
      target: 100,
      key: seeded.tenantKey,
      path: () => `/reporting/overview?${year}`,
    },
    {
      name: 'overview, 1 year, RFC 3339 edges',
      target: 100,
      key: seeded.tenantKey,
      path: (i) =>
        `/reporting/overview?from=${yearFrom}T${pad(spread(i, 24), 2)}:17:00Z&to=${yearTo}T${pad(spread(i + 7, 24), 2)}:42:00Z`,
    },
    {
      name: 'overview, 1 year, big customer key (10%)',
      target: 100,
      key: seeded.bigCustomerKey,
      path: () => `/reporting/overview?${year}`,
    },
    {
      name: 'overview, 1 year, customer key (0.5%)',
      target: 100,
      key: seeded.customerKey,
      path: () => `/reporting/overview?${year}`,
    },
    { name: 'overview, all time, tenant key', target: 100, key: seeded.tenantKey, path: () => '/reporting/overview' },
    {
      name: 'assets q=<identifier prefix> (~10 hits)',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/assets?q=AS-0${pad(spread(i, 9999), 4)}`,
    },
    {
      name: 'assets q=<device id>',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/assets?q=trk-${pad(spread(i, 99_999) + 1, 6)}`,
    },
    {
      name: 'inspections q=<operator id> (200 hits)',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/inspections?q=OP-${pad(spread(i, 5000), 5)}`,
    },
    {
      name: 'inspections q=<asset identifier>',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/inspections?q=AS-${pad(spread(i, 99_999) + 1, 6)}`,
    },
    {
      name: 'reports q=<report ref>',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/reports?q=REP-INS-${spread(i, 999_000) + 1000}`,
    },
    {
      name: 'assets page, offset 50k–99.9k',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/assets?offset=${50_000 + spread(i, 49_900)}`,
    },
    {
      name: 'assets page, big customer, offset 5k–9.9k',
      target: 50,
      key: seeded.bigCustomerKey,
      path: (i) => `/reporting/assets?offset=${5_000 + spread(i, 4_900)}`,
    },
    {
      name: 'inspections page, offset 10k–20k',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/inspections?offset=${10_000 + spread(i, 10_000)}`,
    },
    {
      name: 'inspections page, offset 100k–200k',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/inspections?offset=${100_000 + spread(i, 100_000)}`,
    },
    {
      name: 'inspections page, offset 500k–900k',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/inspections?offset=${500_000 + spread(i, 400_000)}`,
    },
    {
      name: 'inspections page, 1 year, offset 100k–400k',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/inspections?${year}&offset=${100_000 + spread(i, 300_000)}`,
    },
    {
      name: 'inspections page, big customer, offset 10k–90k',
      target: 50,
      key: seeded.bigCustomerKey,
      path: (i) => `/reporting/inspections?offset=${10_000 + spread(i, 80_000)}`,
    },
    {
      name: 'reports page, offset 500k–900k',
      target: 50,
      key: seeded.tenantKey,
      path: (i) => `/reporting/reports?offset=${500_000 + spread(i, 400_000)}`,
    },
  ];
  return scenarios;
}

/** Runs the scenarios (GANTRY_BENCH_ONLY filters them by name) and returns the table's lines. */
async function runScenarios(baseUrl: string, scenarios: Scenario[]): Promise<string[]> {
  const only = process.env.GANTRY_BENCH_ONLY;
  log(`load: ${CONCURRENCY} concurrent clients, ${REQUESTS} requests per scenario after warm-up`);
  const header = `${'scenario'.padEnd(46)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'req/s'.padStart(7)}  target p95`;
  const lines = [header, '-'.repeat(header.length + 4)];
  for (const scenario of scenarios) {
    if (only && !scenario.name.includes(only)) continue;
    const result = await runScenario(baseUrl, scenario);
    const verdict = result.p95 < scenario.target ? 'ok' : 'MISSED';
    const line = `${scenario.name.padEnd(46)} ${result.p50.toFixed(1).padStart(8)} ${result.p95.toFixed(1).padStart(8)} ${result.p99.toFixed(1).padStart(8)} ${result.rps.toFixed(0).padStart(7)}  < ${scenario.target} ms ${verdict}`;
    lines.push(line);
    log(line);
  }
  return lines;
}

const loadAverage = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

/**
 * --replica: the scenarios on the primary alone, then with the replica taking the reads,
 * on a private streaming pair seeded like the shared bench database.
 */
async function compareWithReplica(): Promise<void> {
  let seeded: Seed | undefined;
  log('seeding a private primary, then pg_basebackup of a replica');
  const pair = await startStreamingPair(
    async (primary) => {
      await onTestServer((client) => client.query(`CREATE DATABASE ${DATABASE}`), primary.url('postgres'));
      await migrateDatabase(primary.url(DATABASE), { storageMode: 'postgres' });
      const pool = createPool(primary.url(DATABASE), { max: 4, applicationName: 'gantry-bench' });
      try {
        seeded = await timed('seed total', () => seed(pool));
      } finally {
        await pool.end();
      }
    },
    ['shared_buffers=256MB', 'max_wal_size=4GB', 'checkpoint_timeout=30min'],
  );
  try {
    const passes: { name: string; readUrl?: string }[] = [
      { name: 'primary alone' },
      { name: 'reads on the replica', readUrl: pair.replica.url(DATABASE) },
    ];
    const summary: string[] = [];
    for (const pass of passes) {
      const { api, url } = await startApi(pair.primary.url(DATABASE), pass.readUrl);
      try {
        if (pass.readUrl) await waitForReplicaReads(url);
        log(`pass: ${pass.name} (load average ${loadAverage()})`);
        const before = { primary: cpu(pair.primary), replica: cpu(pair.replica), at: performance.now() };
        const lines = await runScenarios(url, scenariosOf(seeded!));
        const seconds = (performance.now() - before.at) / 1000;
        const primaryCpu = cpu(pair.primary) - before.primary;
        const replicaCpu = cpu(pair.replica) - before.replica;
        summary.push(
          `${pass.name.padEnd(22)} ${seconds.toFixed(1).padStart(8)} ${primaryCpu.toFixed(1).padStart(12)} ${((100 * primaryCpu) / seconds).toFixed(0).padStart(10)}% ${replicaCpu.toFixed(1).padStart(12)}   ${loadAverage()}`,
        );
        process.stdout.write(`\n${pass.name}\n${lines.join('\n')}\n\n`);
      } finally {
        api.kill('SIGTERM');
        await once(api, 'exit');
      }
    }
    const header = `${'pass'.padEnd(22)} ${'wall s'.padStart(8)} ${'primary CPU s'.padStart(12)} ${'of a core'.padStart(11)} ${'replica CPU s'.padStart(12)}   load average after (1, 5, 15 min)`;
    process.stdout.write(
      `${header}\n${'-'.repeat(header.length)}\n${summary.join('\n')}\n\nCPU: user + system time of each server's PostgreSQL processes (/proc), during the pass.\n`,
    );
  } finally {
    await pair.destroy();
  }
}

function cpu(cluster: Cluster): number {
  const pid = cluster.postmasterPid();
  if (pid === null) throw new Error('a bench server is down');
  return postgresCpuSeconds(pid);
}

async function waitForReplicaReads(url: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const body = (await fetch(`${url}/readyz`).then(
      (response) => response.json(),
      () => null,
    )) as { databases?: { replica?: { readsTo?: string } } } | null;
    if (body?.databases?.replica?.readsTo === 'replica') return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error('the replica did not take reads');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
