import { beginInSnapshot, type Pool, type PoolClient } from '@gantry/db';

/** Connections the pool can hand out at once: idle ones and room for new ones, none while requests queue. */
function spareConnections(pool: Pool): number {
  if (pool.waitingCount > 0) return 0;
  return pool.idleCount + Math.max(0, (pool.options.max ?? 10) - pool.totalCount);
}

/**
 * Runs `fn` on up to `width` pooled connections that all read one read-only snapshot:
 * the first takes it and exports it (pg_export_snapshot), the others import it (SET
 * TRANSACTION SNAPSHOT), so statements that do not depend on each other run at the same
 * time and still see exactly the same commits. `at` is the snapshot's statement time.
 *
 * The first connection is waited for like any other; the rest are taken only when the
 * pool can spare them at once (a request that held one connection while waiting for
 * another could, with enough such requests, leave the pool waiting on itself). `fn` gets
 * at least one connection and must accept however many it gets.
 */
export async function inSharedSnapshot<T>(
  pool: Pool,
  width: number,
  fn: (clients: PoolClient[], at: Date) => Promise<T>,
): Promise<T> {
  const first = await pool.connect();
  const extra = Math.min(width - 1, spareConnections(pool));
  // Asked for in this same tick, so they are the spare ones counted above.
  const others = await Promise.allSettled(Array.from({ length: extra }, () => pool.connect()));
  const clients = [first];
  for (const other of others) if (other.status === 'fulfilled') clients.push(other.value);
  let failed = false;
  try {
    await first.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows } = await first.query<{ at: Date; snapshot: string | null }>(
      `SELECT statement_timestamp() AS at, ${clients.length > 1 ? 'pg_export_snapshot()' : 'NULL'} AS snapshot`,
    );
    const { at, snapshot } = rows[0]!;
    if (snapshot !== null) await Promise.all(clients.slice(1).map((client) => beginInSnapshot(client, snapshot)));
    const result = await fn(clients, at);
    // The exporting transaction ends last: the others imported its snapshot.
    await Promise.all(clients.slice(1).map((client) => client.query('COMMIT')));
    await first.query('COMMIT');
    return result;
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // After a failure another connection may still be running a statement of `fn`: the
    // connections are closed rather than rolled back (closing ends their transactions).
    for (const client of clients) client.release(failed);
  }
}
