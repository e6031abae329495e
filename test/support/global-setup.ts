import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { checkTimescaleAvailability, dbDirectory, migrateDatabase, type StorageMode } from '@gantry/db';
import { startTestBroker, type TestBroker } from './broker.ts';
import { serverUrl, withDatabase } from './database-url.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Migrated template database per storage mode available on this server. */
    templates: Partial<Record<StorageMode, string>>;
    /** URL of the Mosquitto the tests share (the project's config, a port of its own). */
    mqttUrl: string;
  }
}

/** A hash of everything that shapes the schema, so templates are rebuilt when it changes. */
function schemaFingerprint(): string {
  const hash = createHash('sha256');
  for (const folder of ['migrations', 'postgres', 'timescaledb', 'gold']) {
    const dir = path.join(dbDirectory, folder);
    for (const file of readdirSync(dir).sort()) hash.update(file).update(readFileSync(path.join(dir, file)));
  }
  hash.update(readFileSync(new URL('../../packages/db/src/gold.ts', import.meta.url)));
  return hash.digest('hex').slice(0, 10);
}

async function ensureTemplate(admin: pg.Client, mode: StorageMode, fingerprint: string): Promise<string> {
  const name = `gantry_tpl_${mode}_${fingerprint}_test`;
  // Serialise template creation across concurrent test runs on the same server.
  await admin.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) {
      const building = `${name.slice(0, -5)}_building_test`;
      await admin.query(`DROP DATABASE IF EXISTS ${building}`);
      await admin.query(`CREATE DATABASE ${building}`);
      await migrateDatabase(withDatabase(serverUrl(), building), {
        storageMode: mode,
        retention: { bronzeDays: 14, readingDays: 400 },
      });
      if (mode === 'timescaledb') {
        // Templates must not carry scheduled jobs that fire inside every clone at once.
        const client = new pg.Client({ connectionString: withDatabase(serverUrl(), building) });
        await client.connect();
        await client.query(
          `SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs WHERE job_id >= 1000`,
        );
        // Nor the record of a job run while it was built: a policy that ran (and failed,
        // as they do on some TimescaleDB/PostgreSQL pairs) in the building database would
        // make every clone report its gold as failed before anything ran in it.
        await client.query(`DO $$ BEGIN
          DELETE FROM _timescaledb_internal.bgw_job_stat;
          IF to_regclass('_timescaledb_internal.bgw_job_stat_history') IS NOT NULL THEN
            DELETE FROM _timescaledb_internal.bgw_job_stat_history;
          END IF;
        END $$`);
        await client.end();
      }
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
      await admin.query(`ALTER DATABASE ${name} WITH IS_TEMPLATE true`);
    }
    // Each run stamps the template it uses; templates of other schemas (other branches,
    // earlier commits) are dropped once no run has used them for a day, so concurrent
    // runs on different schemas never pull a template from under each other.
    await admin.query(`COMMENT ON DATABASE ${name} IS '${new Date().toISOString()}'`);
    const stale = await admin.query<{ datname: string }>(
      `SELECT d.datname FROM pg_database d
        WHERE d.datname LIKE $1 AND d.datname <> $2
          AND coalesce(shobj_description(d.oid, 'pg_database'), '1970-01-01')::timestamptz < now() - interval '1 day'`,
      [`gantry_tpl_${mode}_%_test`, name],
    );
    for (const row of stale.rows) {
      await admin.query(`ALTER DATABASE ${row.datname} WITH IS_TEMPLATE false`).catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS ${row.datname}`).catch(() => undefined);
    }
  } finally {
    await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
  }
  return name;
}

/**
 * Builds dist/ (incremental: a fraction of a second when nothing changed). The services the
 * tests spawn run the built JavaScript, as deployed, so even one test file run on its own
 * (`pnpm vitest run test/x.test.ts`) must not find a stale or missing build.
 */
function buildWorkspace(): void {
  execFileSync(process.execPath, [fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url))], {
    stdio: 'inherit',
  });
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  buildWorkspace();
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  const fingerprint = schemaFingerprint();
  const templates: Partial<Record<StorageMode, string>> = {
    postgres: await ensureTemplate(admin, 'postgres', fingerprint),
  };
  if (process.env.GANTRY_TEST_TIMESCALEDB !== 'off') {
    const availability = await checkTimescaleAvailability(admin);
    if (availability.available) {
      // A template built by another TimescaleDB (or PostgreSQL) version holds that version's
      // catalog: an upgraded server gets a template of its own.
      const { rows } = await admin.query<{ versions: string }>(
        `SELECT current_setting('server_version_num') || coalesce(
           (SELECT default_version FROM pg_available_extensions WHERE name = 'timescaledb'), '') AS versions`,
      );
      const versioned = createHash('sha256')
        .update(fingerprint)
        .update(rows[0]?.versions ?? '')
        .digest('hex');
      templates.timescaledb = await ensureTemplate(admin, 'timescaledb', versioned.slice(0, 10));
    } else if (process.env.GANTRY_TEST_TIMESCALEDB === 'required') {
      // CI installs TimescaleDB and asks for both modes: a silent skip would hide half the suite.
      throw new Error(`GANTRY_TEST_TIMESCALEDB=required, but ${availability.reason}`);
    } else console.info(`[gantry tests] TimescaleDB mode skipped: ${availability.reason}`);
  }
  await admin.end();

  let broker: TestBroker | null = null;
  let mqttUrl = process.env.GANTRY_TEST_MQTT_URL;
  if (!mqttUrl) {
    broker = await startTestBroker();
    mqttUrl = broker.url;
  }
  project.provide('templates', templates);
  project.provide('mqttUrl', mqttUrl);
  return async () => {
    await broker?.stop();
  };
}
