import type { Queryable } from './pool.ts';
import { recordedStorageMode, type StorageMode } from './storage-mode.ts';

export interface DatabaseStatus {
  storageMode: StorageMode | null;
  serverVersion: string;
  timescaledbVersion: string | null;
  migrations: string[];
  gold: Array<{
    relation: string;
    status: string;
    coverageFrom: Date | null;
    coverageTo: Date | null;
    updatedAt: Date | null;
  }>;
}

/** What `gantry status` shows about the database. */
export async function readDatabaseStatus(db: Queryable): Promise<DatabaseStatus> {
  const version = await db.query<{ server: string; timescaledb: string | null }>(
    `SELECT current_setting('server_version') AS server,
            (SELECT extversion FROM pg_extension WHERE extname = 'timescaledb') AS timescaledb`,
  );
  const storageMode = await recordedStorageMode(db);
  const migrations: string[] = [];
  for (const table of ['gantry_migrations', 'gantry_migrations_postgres', 'gantry_migrations_timescaledb']) {
    const exists = await db.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [table]);
    if (!exists.rows[0]?.present) continue;
    const { rows } = await db.query<{ name: string }>(`SELECT name FROM ${table} ORDER BY run_on, id`);
    migrations.push(
      ...rows.map((row) => (table === 'gantry_migrations' ? row.name : `${table.slice(18)}/${row.name}`)),
    );
  }
  const gold =
    storageMode === null
      ? []
      : (
          await db.query<{
            relation: string;
            status: string;
            coverage_from: Date | null;
            coverage_to: Date | null;
            updated_at: Date | null;
          }>(`SELECT relation, status, coverage_from, coverage_to, updated_at FROM gold_coverage ORDER BY relation`)
        ).rows.map((row) => ({
          relation: row.relation,
          status: row.status,
          coverageFrom: row.coverage_from,
          coverageTo: row.coverage_to,
          updatedAt: row.updated_at,
        }));
  return {
    storageMode,
    serverVersion: version.rows[0]?.server ?? 'unknown',
    timescaledbVersion: version.rows[0]?.timescaledb ?? null,
    migrations,
    gold,
  };
}
