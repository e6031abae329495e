import type { Queryable } from '@gantry/db';

/** The size of the tables derivation rewrites (sessions, segments; pages of 8 KiB: heap, all indexes) and row writes so far. */
export interface SessionTableStats {
  table: string;
  fillfactor: string;
  rows: number;
  heapPages: number;
  indexPages: number;
  inserted: number;
  updated: number;
  hot: number;
  deleted: number;
}

/**
 * Backends publish their write counters at most once a second and within 10 s of going
 * idle: read a while after the writes of interest (the counters are cumulative).
 */
export async function sessionTableStats(db: Queryable): Promise<SessionTableStats[]> {
  await db.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.query<SessionTableStats>(
    `/* bench:sessionTableStats */
     SELECT c.relname AS "table",
            coalesce((SELECT option_value FROM pg_options_to_table(c.reloptions) WHERE option_name = 'fillfactor'), '100') AS fillfactor,
            s.n_live_tup::int AS rows, (pg_relation_size(c.oid) / 8192)::int AS "heapPages",
            (pg_indexes_size(c.oid) / 8192)::int AS "indexPages", s.n_tup_ins::int AS inserted, s.n_tup_upd::int AS updated,
            s.n_tup_hot_upd::int AS hot, s.n_tup_del::int AS deleted
       FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE c.relname IN ('usage_sessions', 'identifier_sessions', 'telemetry_segments') AND c.relnamespace = 'public'::regnamespace
      ORDER BY c.relname DESC`,
  );
  return rows;
}

/** One line per table: its size and the rows written between two readings (`before` may be empty). */
export function describeSessionTables(before: SessionTableStats[], after: SessionTableStats[]): string[] {
  return after.map((now) => {
    const was = before.find((b) => b.table === now.table) ?? {
      ...now,
      heapPages: 0,
      indexPages: 0,
      inserted: 0,
      updated: 0,
      hot: 0,
      deleted: 0,
    };
    const updated = now.updated - was.updated;
    const hot = updated > 0 ? Math.round((100 * (now.hot - was.hot)) / updated) : 0;
    return (
      `${now.table} (fillfactor ${now.fillfactor}): ${now.rows.toLocaleString()} rows, heap ${was.heapPages} → ${now.heapPages} pages, ` +
      `indexes ${was.indexPages} → ${now.indexPages} pages; rows inserted ${(now.inserted - was.inserted).toLocaleString()}, ` +
      `updated ${updated.toLocaleString()} (HOT ${hot} %), deleted ${(now.deleted - was.deleted).toLocaleString()}`
    );
  });
}
