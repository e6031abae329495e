import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundedFloat8 } from '../../services/api/src/features/telemetry/sql.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

// roundedFloat8 replaces round(x::numeric, d)::float8 in the session lists and their
// exports; a figure that printed differently would change both the JSON and the files.

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('telemetry_rounding');
});

afterAll(async () => {
  await db?.drop();
});

/** Values that probe the ties (k + 0.5 at every scale), values just beside them, and the edges. */
const values = `
  SELECT (random() - 0.5) * 10 ^ (random() * 14 - 4) FROM generate_series(1, 100000)
  UNION ALL SELECT (k / 2000.0)::float8 FROM generate_series(-20000, 20000) AS k
  UNION ALL SELECT (k / 200.0)::float8 + e
    FROM generate_series(-2000, 2000) AS k,
         (VALUES (0::float8), (1e-15), (-1e-15), (1e-12), (-1e-12), (2e-16), (-2e-16)) AS e(e)
  UNION ALL SELECT x FROM unnest(ARRAY['NaN', 'Infinity', '-Infinity', '-0', '0', '1e9', '-1e9', '99999999.95',
    '1e15', '1e300', '-1e-300', '1.15', '2.675', '0.045', '0.05', '0.005', '1.005', '-0.05', '-0.04', '4.35',
    '0.30000000000000004', '0.04999999999999999']::float8[]) AS x`;

describe('roundedFloat8', () => {
  it.each([0, 1, 2])('prints every float8 exactly as round(x::numeric, %i)::float8 does', async (digits) => {
    const { rows } = await db.pool.query<{ total: number; differing: string[] }>(
      `SELECT count(*)::int AS total,
              coalesce(array_agg(x::text || ': ' || fast || ' vs ' || exact) FILTER (WHERE fast IS DISTINCT FROM exact), '{}') AS differing
         FROM (SELECT x, (${roundedFloat8('x', digits)})::text AS fast, round(x::numeric, ${digits})::float8::text AS exact
                 FROM (${values}) AS v(x)) AS compared`,
    );
    expect(rows[0]?.total).toBeGreaterThan(150_000);
    expect(rows[0]?.differing.slice(0, 5)).toEqual([]);
  });

  it('gives the loaded percentage of whole seconds exactly as the numeric division rounded to 2 places', async () => {
    const exact = 'l * 100.0 / (l + e)';
    const { rows } = await db.pool.query<{ total: number; differing: number }>(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE fast IS DISTINCT FROM exact)::int AS differing
         FROM (SELECT (${roundedFloat8(exact, 2, 'l::float8 * 100 / (l + e)::float8')})::text AS fast,
                      round((${exact})::numeric, 2)::float8::text AS exact
                 FROM generate_series(0, 600) AS l, generate_series(1, 600) AS e) AS compared`,
    );
    expect(rows[0]).toEqual({ total: 601 * 600, differing: 0 });
  });
});
