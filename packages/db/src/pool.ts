import pg from 'pg';
import type { Logger } from '@gantry/logger';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that can run a query: a pool or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// timestamptz arrives as Date (pg's default); bigint (int8) as a JS number, since every
// bigint Gantry stores (counts, hourmeter seconds, bytes) stays far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (value) => Number(value));

export interface PoolOptions {
  max?: number;
  applicationName?: string;
  logger?: Logger;
  /**
   * Server-side bound on each statement (statement_timeout), so a request never waits
   * forever on a lock or a stalled server; absent means none (derivation, migrations).
   */
  statementTimeoutMs?: number;
  /** How long to wait for a connection, from the pool or the server (default 10 s). */
  connectionTimeoutMs?: number;
}

export function createPool(connectionString: string, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'gantry',
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    // No JIT compilation: Gantry's statements are index-driven and short, and the compiler
    // starts on the planner's cost estimate alone (jit_above_cost); a data-quality statement
    // over 10,000 devices that a misestimate pushed past it took 3.4 s, of which 0.4 s was
    // running the statement and the rest compiling it.
    options: '-c jit=off',
    ...(options.statementTimeoutMs === undefined ? {} : { statement_timeout: options.statementTimeoutMs }),
  });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', (error) =>
    options.logger?.warn(
      { error: error.message, code: (error as { code?: string }).code },
      'idle database connection failed',
    ),
  );
  // Nor a checked-out one between two queries (the database shut down under a running
  // transaction, as Ctrl-C does to the embedded server): pg emits 'error' on the client,
  // which crashes the process when nobody listens; the next query on it fails instead,
  // and that failure takes the usual path (rollback, retry with backoff).
  pool.on('connect', (client) =>
    client.on('error', (error) =>
      options.logger?.warn(
        { error: error.message, code: (error as { code?: string }).code },
        'database connection failed',
      ),
    ),
  );
  return pool;
}

/** Runs fn inside BEGIN/COMMIT on one client; rolls back and rethrows on error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await inTransaction(client, fn);
  } finally {
    client.release();
  }
}

/** Runs fn inside BEGIN/COMMIT on a client the caller holds; rolls back and rethrows on error. */
export async function inTransaction<T>(client: pg.PoolClient, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Starts a read-only repeatable-read transaction on `client` that sees exactly the
 * snapshot another transaction exported with pg_export_snapshot(), so statements on
 * several connections read the same commits. The exporting transaction must stay open
 * until this one has started.
 */
export async function beginInSnapshot(client: Pick<pg.Client, 'query'>, snapshot: string): Promise<void> {
  await client.query(
    `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT ${pg.escapeLiteral(snapshot)}`,
  );
}

/** True for errors that mean "the database is unreachable right now", worth retrying. */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: string }).code ?? '';
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN'].includes(code) ||
    code.startsWith('08') || // connection exception class
    code === '57P01' || // admin_shutdown
    code === '57P02' || // crash_shutdown
    code === '57P03' || // cannot_connect_now
    /Connection terminated|connection timeout|Client has encountered a connection error/i.test(error.message)
  );
}

/**
 * True for errors that mean "no writable primary behind the endpoint right now": the
 * connection failures above, a pool that timed out waiting for one, a node that a
 * failover demoted under an open connection (25006 read_only_sql_transaction) and a
 * node that is still starting or shutting down. A caller can answer "retry later"
 * instead of failing: the cause is the database, not the request.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (isConnectionError(error)) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: string }).code ?? '';
  return (
    code === '25006' || // read_only_sql_transaction: this node is a replica now
    code === '53300' || // too_many_connections (a restarting node, or the new primary flooded)
    /timeout exceeded when trying to connect/i.test(error.message) // pg-pool's own connection timeout
  );
}
