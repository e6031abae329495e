import { randomBytes } from 'node:crypto';
import { createPool, migrateDatabase, type Pool } from '@gantry/db';
import { onServer, serverUrl, withDatabase } from '../support/database-url.ts';

/** Migrates a database the way a deployment does (PostgreSQL storage mode, default retention). */
export async function migrateForDrill(url: string): Promise<void> {
  await migrateDatabase(url, { storageMode: 'postgres', retention: { bronzeDays: 14, readingDays: 400 } });
}

export interface DrillDatabase {
  name: string;
  url: string;
  pool: Pool;
  drop(): Promise<void>;
}

function assertDrillName(name: string): void {
  if (!/^gantry_drill_[a-z0-9_]+_test$/.test(name))
    throw new Error(`refusing to touch database "${name}": not a drill database`);
}

/**
 * A fresh, migrated database `gantry_drill_<label>_<random>_test` on the test server
 * (GANTRY_TEST_DATABASE_URL or 127.0.0.1:5432); drop() removes it.
 */
export async function createDrillDatabase(label: string): Promise<DrillDatabase> {
  const name = `gantry_drill_${label.replace(/[^a-z0-9]+/g, '_')}_${randomBytes(3).toString('hex')}_test`;
  assertDrillName(name);
  await onServer((client) => client.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(serverUrl(), name);
  let pool: Pool | undefined;
  const drop = async () => {
    await pool?.end().catch(() => undefined);
    if (process.env.DRILL_KEEP === '1') {
      console.log(`  DRILL_KEEP=1: database ${name} kept (${url})`);
      return;
    }
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  };
  try {
    await migrateForDrill(url);
    pool = createPool(url, { max: 6, applicationName: 'gantry-drill' });
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, url, pool, drop };
}
