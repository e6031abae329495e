import { isConnectionError, isDatabaseUnavailable, type Pool, type PoolClient } from '@gantry/db';

/**
 * One round trip opens the transaction and bounds every statement in it: a batch that
 * waits on a lock (another writer's device_state rows, a worker settling its queue rows)
 * or a silent network fails and is retried instead of stalling ingest forever.
 */
export async function inTransaction<T>(
  pool: Pool,
  statementTimeoutMs: number,
  fn: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client has no pool listener: a server shutdown mid-query would emit an
  // unhandled 'error' and crash the process. The failing query rejects anyway.
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    await client.query(`BEGIN; SET LOCAL statement_timeout = ${Math.max(1, Math.trunc(statementTimeoutMs))}`);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    // A node demoted by a failover answers 25006 on a connection that still works: the
    // connection is dropped so the retry reconnects through the endpoint to the new primary.
    if (isDatabaseUnavailable(error)) broken ??= error as Error;
    throw error;
  } finally {
    client.off('error', onError);
    // A connection that failed mid-transaction is not given back to the pool.
    client.release(broken);
  }
}

/**
 * Errors caused by the data of a batch (SQLSTATE classes 22 data_exception and 23
 * integrity_constraint_violation), or a TypeError/RangeError while encoding it:
 * retrying the same batch cannot help, so it is split to isolate the message. Anything else (outage, deadlock, timeout, a schema not yet
 * migrated) is retried with backoff and nothing is acknowledged meanwhile.
 */
export function isDataError(error: unknown): boolean {
  if (isConnectionError(error)) return false;
  if (error instanceof TypeError || error instanceof RangeError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22|23)/.test(code);
}
