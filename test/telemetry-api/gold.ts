import { goldDefinition, goldRelation } from '@gantry/db';
import type { TestDatabase } from '../support/database.ts';

/**
 * Materializes gold relations for [from, to) the way each is made — DELETE + INSERT from
 * the relation's definition for a table (PostgreSQL mode, and utilization in both modes),
 * a refresh for a continuous aggregate (positions in TimescaleDB mode) — and records the
 * coverage, as the worker's refresher will. Relations are given in roll-up order (hourly
 * before daily).
 */
export async function materializeGold(db: TestDatabase, relations: string[], from: string, to: string): Promise<void> {
  for (const name of relations) {
    const relation = goldRelation(name);
    if (db.mode === 'timescaledb' && !relation.keptByDeltas) {
      await db.pool.query(`CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz)`, [
        name,
        from,
        to,
      ]);
    } else {
      await db.pool.query(`DELETE FROM ${name} WHERE bucket >= $1 AND bucket < $2`, [from, to]);
      const filter = `${relation.timeColumn} >= '${from}'::timestamptz AND ${relation.timeColumn} < '${to}'::timestamptz`;
      await db.pool.query(`INSERT INTO ${name} ${goldDefinition(name, filter)}`);
    }
    await db.pool.query(
      `UPDATE gold_coverage SET status = 'ok', coverage_from = $2, coverage_to = $3, updated_at = now() WHERE relation = $1`,
      [name, from, to],
    );
  }
  // The fleet rollup follows utilization gold, as the worker keeps it.
  if (relations.includes('utilization_daily')) {
    await db.pool.query(`SELECT gantry_fleet_recompute(NULL, NULL, NULL)`);
    await db.pool.query(
      `UPDATE gold_coverage SET status = 'ok', updated_at = now() WHERE relation = 'utilization_fleet'`,
    );
  }
}
