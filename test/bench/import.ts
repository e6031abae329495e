/**
 * `pnpm bench:import` — bulk provisioning of BENCH_ROWS assets (10,000), each with one
 * device, type and customer, posted as one CSV file to
 * `POST /api/admin/v1/tenants/{tenantId}/import` (API in this process, fresh migrated
 * database): the first run (everything created), then the same file again (nothing
 * changes), then the file with every name changed (everything updated). Each figure is
 * the wall time of the HTTP request, parsing and checking included, with the load average.
 *
 * Env: GANTRY_BENCH_DATABASE_URL, BENCH_ROWS (10000), BENCH_KEEP=1 keeps the database.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { provisioning, startApiServer } from '@gantry/api';
import { createOutbox, createPool, migrateDatabase } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { TEST_ADMIN_TOKEN, testConfig } from '../support/api.ts';

const ROWS = Number(process.env.BENCH_ROWS ?? 10_000);
const serverUrl =
  process.env.GANTRY_BENCH_DATABASE_URL ??
  process.env.GANTRY_TEST_DATABASE_URL ??
  'postgresql://postgres@127.0.0.1:5432/postgres';

const load = () =>
  `load ${os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ')}`;

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

function fleetCsv(rows: number, suffix: string, prefix: string): string {
  const lines = ['identifier,name,assetType,customerName,externalRef,deviceId,deviceName'];
  const types = ['Straddle carrier', 'Reach stacker', 'Terminal tractor', 'Forklift'];
  for (let i = 0; i < rows; i += 1) {
    const id = String(i).padStart(5, '0');
    lines.push(
      `M-${id},Machine ${id}${suffix},${types[i % types.length]},Customer ${i % 40},ERP-${id},${prefix}-${id},Unit ${id}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const name = `gantry_bench_import_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(serverUrl, name);
  const pool = createPool(url, { max: 4, applicationName: 'gantry-bench-import' });
  try {
    await migrateDatabase(url, { storageMode: 'auto' });
    const config = testConfig(url);
    const api = await startApiServer(
      { config, pool, logger: silentLogger(), outbox: createOutbox({ maxAttempts: 3 }), readiness: {} },
      { host: '127.0.0.1', port: 0 },
    );
    try {
      const tenant = await provisioning.createTenant(
        { pool, outbox: createOutbox({ maxAttempts: 3 }) },
        { name: 'Bench' },
      );
      const prefix = `bench-${randomBytes(3).toString('hex')}`;
      const file = fleetCsv(ROWS, '', prefix);
      console.log(
        `import of ${ROWS.toLocaleString('en-US')} rows (${(file.length / 1e6).toFixed(2)} MB CSV), ${os.cpus().length} cores`,
      );
      const post = async (label: string, body: string) => {
        const began = performance.now();
        const response = await fetch(`${api.url}/api/admin/v1/tenants/${tenant.id}/import`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'Content-Type': 'text/csv' },
          body,
        });
        const result = (await response.json()) as { assets?: unknown; devices?: unknown };
        const seconds = (performance.now() - began) / 1000;
        if (response.status !== 200)
          throw new Error(`${label}: ${response.status} ${JSON.stringify(result).slice(0, 500)}`);
        console.log(
          `${label.padEnd(28)} ${seconds.toFixed(2)} s  assets ${JSON.stringify(result.assets)} devices ${JSON.stringify(result.devices)}  (${load()})`,
        );
      };
      await post('first run (all created)', file);
      await post('same file again (no change)', file);
      await post('every name changed', fleetCsv(ROWS, ' (renamed)', prefix));
    } finally {
      await api.close();
    }
  } finally {
    await pool.end();
    if (process.env.BENCH_KEEP !== '1') await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    else console.log(`kept database ${name}`);
    await admin.end();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
