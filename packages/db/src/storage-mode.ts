import type { Queryable } from './pool.ts';

export type StorageMode = 'timescaledb' | 'postgres';
export type RequestedStorageMode = StorageMode | 'auto';

export class StorageModeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StorageModeError';
  }
}

export interface TimescaleAvailability {
  available: boolean;
  reason: string;
}

/**
 * Whether this server can run TimescaleDB mode: the extension is installed (or can be)
 * and loaded with the `timescale` license (continuous aggregates, compression and
 * policies are not in the Apache-only build).
 */
export async function checkTimescaleAvailability(client: Queryable): Promise<TimescaleAvailability> {
  const { rows } = await client.query<{ installed: boolean; available: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb') AS installed,
            EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb') AS available`,
  );
  const state = rows[0];
  if (!state?.available && !state?.installed) {
    return { available: false, reason: 'the timescaledb extension is not installed on this PostgreSQL server' };
  }
  const preload = await client.query<{ value: string }>(
    `SELECT coalesce(current_setting('shared_preload_libraries', true), '') AS value`,
  );
  if (!/\btimescaledb\b/.test(preload.rows[0]?.value ?? '')) {
    return { available: false, reason: 'timescaledb is not in shared_preload_libraries' };
  }
  const license = await client.query<{ value: string | null }>(
    `SELECT current_setting('timescaledb.license', true) AS value`,
  );
  const value = license.rows[0]?.value ?? null;
  if (value !== null && value !== 'timescale') {
    return { available: false, reason: `timescaledb.license is '${value}', continuous aggregates need 'timescale'` };
  }
  return { available: true, reason: 'timescaledb with the timescale license' };
}

export async function recordedStorageMode(client: Queryable): Promise<StorageMode | null> {
  const exists = await client.query<{ present: boolean }>(`SELECT to_regclass('gantry_meta') IS NOT NULL AS present`);
  if (!exists.rows[0]?.present) return null;
  const { rows } = await client.query<{ value: StorageMode }>(
    `SELECT value #>> '{}' AS value FROM gantry_meta WHERE key = 'storage_mode'`,
  );
  return rows[0]?.value ?? null;
}

const modeCache = new WeakMap<object, StorageMode>();

/** The recorded storage mode of the database behind `db` (a pool or client), read once per object. */
export async function storageModeOf(db: Queryable): Promise<StorageMode> {
  const cached = modeCache.get(db);
  if (cached) return cached;
  const mode = (await recordedStorageMode(db)) ?? 'postgres';
  modeCache.set(db, mode);
  return mode;
}

/**
 * Decides the storage mode of a database: the one recorded at its first migration, or
 * for a new database the requested one (auto: TimescaleDB when available).
 */
export async function resolveStorageMode(client: Queryable, requested: RequestedStorageMode): Promise<StorageMode> {
  const recorded = await recordedStorageMode(client);
  if (recorded !== null) {
    if (requested !== 'auto' && requested !== recorded) {
      throw new StorageModeError(
        `GANTRY_STORAGE_MODE=${requested}, but this database was set up in ${recorded} mode; ` +
          `a database keeps its mode (use a new database, or GANTRY_STORAGE_MODE=auto)`,
      );
    }
    return recorded;
  }
  if (requested === 'postgres') return 'postgres';
  const availability = await checkTimescaleAvailability(client);
  if (requested === 'timescaledb' && !availability.available) {
    throw new StorageModeError(`GANTRY_STORAGE_MODE=timescaledb, but ${availability.reason}`);
  }
  return availability.available ? 'timescaledb' : 'postgres';
}

/** Applies the configured retention: TimescaleDB policies, or nothing (the worker prunes). */
export async function applyRetentionPolicies(
  client: Queryable,
  mode: StorageMode,
  retention: { bronzeDays: number; readingDays: number },
): Promise<void> {
  if (mode !== 'timescaledb') return;
  const policies: Array<[string, number]> = [
    ['device_message_batches', retention.bronzeDays],
    ['device_message_rows', retention.bronzeDays],
    ['telemetry_readings', retention.readingDays],
  ];
  for (const [table, days] of policies) {
    await client.query(`SELECT remove_retention_policy($1::regclass, if_exists => true)`, [table]);
    await client.query(`SELECT add_retention_policy($1::regclass, make_interval(days => $2::int))`, [table, days]);
  }
}
