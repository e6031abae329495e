import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { createPool, type Pool, type StorageMode } from '@gantry/db';
import { onServer, serverUrl, withDatabase } from './database-url.ts';

export interface TestDatabase {
  name: string;
  url: string;
  mode: StorageMode;
  pool: Pool;
  /** Drops the database (refuses any name without "test"). */
  drop(): Promise<void>;
}

/** Storage modes this server can run: postgres always, timescaledb where available. */
export function availableStorageModes(): StorageMode[] {
  const templates = inject('templates');
  return (['postgres', 'timescaledb'] as const).filter((mode) => templates[mode] !== undefined);
}

function assertTestName(name: string): void {
  if (!/test/.test(name) || !/^[a-z0-9_]+$/.test(name))
    throw new Error(`refusing to touch database "${name}": not a test database`);
}

/** A fresh database cloned from the migrated template of the given mode. */
export async function createTestDatabase(label: string, mode: StorageMode = 'postgres'): Promise<TestDatabase> {
  const template = inject('templates')[mode];
  if (!template) throw new Error(`no ${mode} template: this server cannot run ${mode} mode`);
  const name = `gantry_${label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 30)}_${randomBytes(3).toString('hex')}_test`;
  assertTestName(name);
  // Cloning fails while another session clones the same template (SQLSTATE 55006, other
  // test files or other runs on this server); wait for it to finish and try again.
  for (let attempt = 1; ; attempt += 1) {
    try {
      await onServer((client) => client.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== '55006' || attempt >= 100) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200));
    }
  }
  const url = withDatabase(serverUrl(), name);
  const pool = createPool(url, { max: 10, applicationName: 'gantry-test' });
  return {
    name,
    url,
    mode,
    pool,
    async drop() {
      assertTestName(name);
      await pool.end().catch(() => undefined);
      await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
