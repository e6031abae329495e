import { silentLogger } from '@gantry/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableMaintenanceLoop } from '../../services/worker/src/features/housekeeping/table-maintenance.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { waitFor } from '../support/ingest.ts';

// pg_stat_* reach other sessions a little late: reads wait for what they expect (waitFor).
describe('table maintenance by the worker (autovacuum off)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('table_maintenance');
  });

  afterAll(async () => {
    await db.drop();
  });

  async function tableStats(name: string) {
    const { rows } = await db.pool.query<{
      analyzed: number;
      vacuumed: number;
      dead: number;
      statistics: number;
    }>(
      `SELECT analyze_count::int AS analyzed, vacuum_count::int AS vacuumed, n_dead_tup::int AS dead,
              (SELECT count(*)::int FROM pg_stats WHERE schemaname = 'public' AND tablename = $1) AS statistics
       FROM pg_stat_user_tables WHERE relname = $1`,
      [name],
    );
    return rows[0];
  }

  it('analyzes a table that changed past the threshold and vacuums one with dead rows, then rests', async () => {
    await db.pool.query(`CREATE TABLE grown (id int PRIMARY KEY, note text)`);
    await db.pool.query(`INSERT INTO grown SELECT i, 'n' || i FROM generate_series(1, 2000) i`);
    await db.pool.query(
      `CREATE TABLE churned (id int PRIMARY KEY, note text) WITH (autovacuum_vacuum_threshold = 100, autovacuum_vacuum_scale_factor = 0)`,
    );
    await db.pool.query(`INSERT INTO churned SELECT i, 'n' || i FROM generate_series(1, 500) i`);
    await db.pool.query(`ANALYZE churned`);
    await db.pool.query(`DELETE FROM churned WHERE id <= 300`);
    await db.pool.query(`CREATE TABLE quiet (id int PRIMARY KEY)`);
    await db.pool.query(`INSERT INTO quiet SELECT i FROM generate_series(1, 10) i`);
    await db.pool.query(`ANALYZE quiet`);
    await db.pool.query(`INSERT INTO quiet SELECT i FROM generate_series(11, 20) i`);
    await waitFor(
      () => tableStats('churned'),
      (stats) => (stats?.dead ?? 0) >= 300,
      10_000,
      'the deleted rows in pg_stat_user_tables',
    );

    const loop = tableMaintenanceLoop({ pool: db.pool, logger: silentLogger() }, { always: true });
    let steps = 0;
    while ((await loop.runOnce()) > 0) {
      steps += 1;
      if (steps > 50) throw new Error('the loop never rests');
    }

    const grown = await waitFor(
      () => tableStats('grown'),
      (stats) => stats?.analyzed === 1,
      10_000,
      'grown analyzed',
    );
    expect(grown).toMatchObject({ analyzed: 1, vacuumed: 0 });
    expect(grown?.statistics).toBeGreaterThan(0);
    const churned = await waitFor(
      () => tableStats('churned'),
      (stats) => stats?.vacuumed === 1,
      10_000,
      'churned vacuumed',
    );
    expect(churned).toMatchObject({ vacuumed: 1, analyzed: 2, dead: 0 });
    // 10 rows since its own ANALYZE: below 50 + 10 %, left alone.
    expect(await tableStats('quiet')).toMatchObject({ analyzed: 1, vacuumed: 0 });
    expect(await loop.runOnce()).toBe(0);
  });

  it('works at the cost delay autovacuum would use, and a stopping worker cancels a VACUUM under way', async () => {
    // 100 ms a pause: this VACUUM would take many seconds.
    await db.pool.query(
      `CREATE TABLE slow (id int, note text) WITH (autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_threshold = 100, autovacuum_vacuum_scale_factor = 0)`,
    );
    await db.pool.query(`INSERT INTO slow SELECT i, repeat('x', 100) FROM generate_series(1, 200000) i`);
    await db.pool.query(`ANALYZE slow`);
    await db.pool.query(`DELETE FROM slow`);
    await waitFor(
      () => tableStats('slow'),
      (stats) => (stats?.dead ?? 0) >= 200_000,
      10_000,
      'the deleted rows in pg_stat_user_tables',
    );
    const loop = tableMaintenanceLoop({ pool: db.pool, logger: silentLogger() }, { always: true });
    // Other due tables of this database go first; step until the VACUUM of slow is running.
    let step: Promise<number> | undefined;
    for (let attempt = 0; attempt < 50; attempt += 1) {
      step = loop.runOnce();
      const vacuuming = await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%VACUUM%slow%' AND pid <> pg_backend_pid()`,
          );
          return rows.length > 0;
        },
        (running) => running,
        500,
        'VACUUM of slow',
      ).catch(() => false);
      if (vacuuming) break;
      await step;
    }
    loop.interrupt?.();
    expect(await step).toBe(1);
    expect(await tableStats('slow')).toMatchObject({ vacuumed: 0 });
    expect(await loop.runOnce()).toBe(0);
  });

  it('does nothing while the server runs autovacuum', async () => {
    const { rows } = await db.pool.query<{ autovacuum: string }>(`SELECT current_setting('autovacuum') AS autovacuum`);
    await db.pool.query(`CREATE TABLE fresh (id int)`);
    await db.pool.query(`INSERT INTO fresh SELECT generate_series(1, 1000)`);
    await waitFor(
      async () =>
        (
          await db.pool.query<{ changed: number }>(
            `SELECT n_mod_since_analyze::int AS changed FROM pg_stat_user_tables WHERE relname = 'fresh'`,
          )
        ).rows[0]?.changed ?? 0,
      (changed) => changed >= 1000,
      10_000,
      'the inserted rows in pg_stat_user_tables',
    );
    const loop = tableMaintenanceLoop({ pool: db.pool, logger: silentLogger() });
    const work = await loop.runOnce();
    if (rows[0]?.autovacuum === 'on') expect(work).toBe(0);
    else expect(work).toBe(1);
  });
});
