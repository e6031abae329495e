import { AsyncLocalStorage } from 'node:async_hooks';
import type { Middleware } from 'koa';
import { Counter, Gauge, register } from 'prom-client';
import type { Config } from '@gantry/config';
import { createPool, isConnectionError, type Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import type { AuthContext } from './http/auth.ts';
import type { RouteSpec } from './http/route.ts';

/**
 * Reads on a streaming replica (GANTRY_DATABASE_READ_URL). The rule:
 * - GET routes flagged `reads: 'replica'` (telemetry, reporting, exports, data quality)
 *   read the replica; everything else (writes, idempotency, service requests, webhooks,
 *   admin, key checks, rate limits) uses the primary.
 * - Read your writes: after a write by an API key, that key's replica reads go to the
 *   primary until the replica has replayed the primary's WAL position as of the write.
 * - Every few seconds the replica's lag is measured; past the bound, or while it does not
 *   answer, every read goes to the primary until it recovers. A replica read that fails
 *   to connect is answered by the primary at once.
 * The features receive one pool (`pool` below) that runs each query on the database the
 * request was routed to (an AsyncLocalStorage value set per request).
 */
export interface ReadRouting {
  /** The pool the features use: the primary, or the replica inside a replica read. */
  pool: Pool;
  /** Middleware of a route: routes a replica read, records the WAL position of a write. */
  forRoute(route: RouteSpec): Middleware[];
  /** For /readyz: the databases this process uses and where reads go. */
  describe(): DatabasesReport;
  close(): Promise<void>;
}

export interface DatabasesReport {
  primary: { endpoint: string };
  replica?: {
    endpoint: string;
    reachable: boolean;
    /** Seconds the replica is behind the primary (0 when caught up); null when unknown. */
    lagSeconds: number | null;
    maxLagSeconds: number;
    /** Where the replica reads of this process go now. */
    readsTo: 'replica' | 'primary';
    checkedAt: string | null;
    error?: string;
  };
}

/** A WAL position ("16/B374D848") as a byte offset. */
export function parseLsn(text: string): bigint {
  const [high = '0', low = '0'] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

export interface WalSample {
  /** Milliseconds since the epoch (this process's clock). */
  at: number;
  lsn: bigint;
}

/**
 * The replica's lag in seconds from the primary's recent WAL positions (oldest first, the
 * newest read just before the replica) and what the replica replayed: 0 when it has
 * replayed all the primary had flushed at the newest sample. Otherwise the tighter of
 * two upper bounds: the age of the newest sample it has replayed entirely, and the age of
 * the last transaction it replayed (`replayAgeSeconds`). The second alone would call a
 * replica of an idle primary minutes behind at the first new commit; the samples alone
 * know nothing older than the oldest kept. Infinity when neither is known.
 */
export function estimateLag(
  samples: readonly WalSample[],
  now: number,
  replayLsn: bigint,
  replayAgeSeconds: number | null,
): number {
  const newest = samples.at(-1);
  if (!newest || replayLsn >= newest.lsn) return 0;
  let bySamples = Number.POSITIVE_INFINITY;
  for (let index = samples.length - 1; index >= 0; index -= 1) {
    const sample = samples[index]!;
    if (sample.lsn <= replayLsn) {
      bySamples = Math.max(0, (now - sample.at) / 1000);
      break;
    }
  }
  return Math.min(bySamples, replayAgeSeconds ?? Number.POSITIVE_INFINITY);
}

interface RequestRoute {
  database: 'primary' | 'replica';
}

const requestRoute = new AsyncLocalStorage<RequestRoute>();

const SAMPLES_KEPT = 64;

function metric<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}

const metrics = {
  reads: metric(
    'gantry_api_replica_routed_reads_total',
    () =>
      new Counter({
        name: 'gantry_api_replica_routed_reads_total',
        help: 'Requests of replica-read routes, by the database that answered them',
        labelNames: ['database'] as const,
      }),
  ),
  lag: metric(
    'gantry_api_replica_lag_seconds',
    () =>
      new Gauge({
        name: 'gantry_api_replica_lag_seconds',
        help: 'Seconds the read replica is behind the primary at the last check (NaN: unknown)',
      }),
  ),
  reachable: metric(
    'gantry_api_replica_reachable',
    () => new Gauge({ name: 'gantry_api_replica_reachable', help: '1 when the read replica answered the last check' }),
  ),
  readsOnReplica: metric(
    'gantry_api_replica_reads_on_replica',
    () =>
      new Gauge({
        name: 'gantry_api_replica_reads_on_replica',
        help: '1 while replica-read routes read the replica, 0 while they fall back to the primary',
      }),
  ),
  databases: metric(
    'gantry_api_database_info',
    () =>
      new Gauge({
        name: 'gantry_api_database_info',
        help: 'The databases this API process uses (role: primary or replica; endpoint: host:port/database)',
        labelNames: ['role', 'endpoint'] as const,
      }),
  ),
};

/** host:port/database of a connection URL: what an operator needs, without credentials. */
export function endpointOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
}

interface ReplicaState {
  reachable: boolean;
  lagSeconds: number | null;
  /** What the replica replayed; null for a server that is not a standby (the primary itself). */
  replayLsn: bigint | null;
  checkedAt: Date | null;
  error?: string;
}

/** The primary alone: no routing, the features use the pool as it is. */
function primaryOnly(primary: Pool, primaryUrl: string): ReadRouting {
  metrics.databases.set({ role: 'primary', endpoint: endpointOf(primaryUrl) }, 1);
  return {
    pool: primary,
    forRoute: () => [],
    describe: () => ({ primary: { endpoint: endpointOf(primaryUrl) } }),
    close: async () => undefined,
  };
}

export function createReadRouting(options: {
  primary: Pool;
  replica: Config['readReplica'];
  poolSize: number;
  logger: Logger;
}): ReadRouting {
  const { primary, replica: settings, logger } = options;
  const primaryUrl = primary.options.connectionString ?? 'postgresql://localhost/';
  if (!settings.url) return primaryOnly(primary, primaryUrl);
  const replicaUrl = settings.url;
  const replica = createPool(replicaUrl, { max: options.poolSize, applicationName: 'gantry-api-reads', logger });
  const monitorPool = createPool(replicaUrl, { max: 1, applicationName: 'gantry-api-lag', logger });
  const samples: WalSample[] = [];
  /** API key id → the primary's WAL position right after that key's latest write. */
  const pendingWrites = new Map<string, bigint>();
  let state: ReplicaState = { reachable: false, lagSeconds: null, replayLsn: null, checkedAt: null };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  metrics.databases.set({ role: 'primary', endpoint: endpointOf(primaryUrl) }, 1);
  metrics.databases.set({ role: 'replica', endpoint: endpointOf(replicaUrl) }, 1);

  const fresh = () => state.reachable && state.lagSeconds !== null && state.lagSeconds <= settings.maxLagSeconds;

  const publish = () => {
    metrics.reachable.set(state.reachable ? 1 : 0);
    metrics.lag.set(state.lagSeconds ?? Number.NaN);
    metrics.readsOnReplica.set(fresh() ? 1 : 0);
  };

  const markUnreachable = (error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    if (state.reachable) logger.warn({ error: message }, 'read replica unreachable: reads go to the primary');
    state = { reachable: false, lagSeconds: null, replayLsn: null, checkedAt: new Date(), error: message };
    publish();
  };

  async function measure(): Promise<void> {
    // The primary first: a replica that replayed this position had everything the primary had flushed then.
    let sample: WalSample | undefined;
    try {
      const { rows } = await primary.query<{ lsn: string }>(
        '/* api:primaryWalPosition */ SELECT pg_current_wal_flush_lsn()::text AS lsn',
      );
      sample = { at: Date.now(), lsn: parseLsn(rows[0]!.lsn) };
    } catch {
      // No primary (a failover under way): the replica's lag cannot be told; keep the last verdict.
      return;
    }
    samples.push(sample);
    if (samples.length > SAMPLES_KEPT) samples.shift();
    try {
      const { rows } = await withTimeout(
        monitorPool.query<{ standby: boolean; replay_lsn: string | null; replay_age: number | null }>(
          `/* api:replicaLag */
           SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replay_lsn,
                  extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS replay_age`,
        ),
        Math.max(5_000, settings.lagCheckMs),
      );
      const row = rows[0]!;
      const wasFresh = fresh();
      if (!row.standby || row.replay_lsn === null) {
        state = { reachable: true, lagSeconds: 0, replayLsn: null, checkedAt: new Date() };
      } else {
        const replayLsn = parseLsn(row.replay_lsn);
        const lag = estimateLag(samples, Date.now(), replayLsn, row.replay_age);
        state = {
          reachable: true,
          lagSeconds: Number.isFinite(lag) ? Math.round(lag * 1000) / 1000 : null,
          replayLsn,
          checkedAt: new Date(),
        };
        for (const [key, lsn] of pendingWrites) if (lsn <= replayLsn) pendingWrites.delete(key);
      }
      if (wasFresh !== fresh()) {
        logger.info(
          { lagSeconds: state.lagSeconds, maxLagSeconds: settings.maxLagSeconds },
          fresh() ? 'read replica serves reads' : 'read replica lags: reads go to the primary',
        );
      }
      publish();
    } catch (error) {
      markUnreachable(error);
    }
  }

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => void measure().finally(schedule), settings.lagCheckMs);
    timer.unref();
  };
  void measure().finally(schedule);

  const caughtUpWith = (keyId: string) => {
    const written = pendingWrites.get(keyId);
    if (written === undefined || state.replayLsn === null) return true;
    if (state.replayLsn >= written) {
      pendingWrites.delete(keyId);
      return true;
    }
    return false;
  };

  const routeReads: Middleware = async (ctx, next) => {
    const auth = ctx.state.auth as AuthContext;
    const onReplica = fresh() && (auth.kind !== 'apiKey' || caughtUpWith(auth.keyId));
    const route: RequestRoute = { database: onReplica ? 'replica' : 'primary' };
    try {
      await requestRoute.run(route, next);
    } finally {
      // The database that answered: a replica read that could not connect moved to the primary.
      metrics.reads.inc({ database: route.database });
    }
  };

  const recordWrite: Middleware = async (ctx, next) => {
    try {
      await next();
    } finally {
      const auth = ctx.state.auth as AuthContext;
      // Before the answer leaves: the key's next read is routed knowing this write.
      if (auth.kind === 'apiKey') await rememberWrite(auth.keyId);
    }
  };

  async function rememberWrite(keyId: string): Promise<void> {
    try {
      const { rows } = await primary.query<{ lsn: string }>(
        '/* api:writePosition */ SELECT pg_current_wal_insert_lsn()::text AS lsn',
      );
      pendingWrites.set(keyId, parseLsn(rows[0]!.lsn));
    } catch (error) {
      // Without a position the key reads the primary until the replica next proves it caught up.
      pendingWrites.set(keyId, state.replayLsn === null ? 0n : state.replayLsn + 1n);
      logger.warn({ error: error instanceof Error ? error.message : String(error) }, 'write position unknown');
    }
  }

  const onReplicaFailure = (route: RequestRoute, error: unknown) => {
    route.database = 'primary';
    markUnreachable(error);
  };

  return {
    pool: routingPool(primary, replica, onReplicaFailure),
    forRoute(route) {
      if (route.reads === 'replica' && route.method === 'get') return [routeReads];
      return route.method === 'get' ? [] : [recordWrite];
    },
    describe: () => ({
      primary: { endpoint: endpointOf(primaryUrl) },
      replica: {
        endpoint: endpointOf(replicaUrl),
        reachable: state.reachable,
        lagSeconds: state.lagSeconds,
        maxLagSeconds: settings.maxLagSeconds,
        readsTo: fresh() ? 'replica' : 'primary',
        checkedAt: state.checkedAt?.toISOString() ?? null,
        ...(state.error ? { error: state.error } : {}),
      },
    }),
    async close() {
      stopped = true;
      clearTimeout(timer);
      await Promise.all([replica.end(), monitorPool.end()]);
    },
  };
}

const CURRENT_POOL = Symbol('gantry.currentPool');

/**
 * The pool the features hold: every property is the primary's, except inside a request
 * routed to the replica, where query, connect and options are the replica's. A replica
 * query or connection that fails to reach the replica is retried on the primary (the
 * route is read-only, so running it again is harmless).
 */
function routingPool(
  primary: Pool,
  replica: Pool,
  onReplicaFailure: (route: RequestRoute, error: unknown) => void,
): Pool {
  const routeOf = () => {
    const route = requestRoute.getStore();
    return route?.database === 'replica' ? route : undefined;
  };
  const query = async (...args: unknown[]) => {
    const route = routeOf();
    const run = (pool: Pool) => (pool.query as (...a: unknown[]) => Promise<unknown>).apply(pool, args);
    if (!route) return run(primary);
    try {
      return await run(replica);
    } catch (error) {
      if (!isConnectionError(error)) throw error;
      onReplicaFailure(route, error);
      return run(primary);
    }
  };
  const connect = async () => {
    const route = routeOf();
    if (!route) return primary.connect();
    try {
      return await replica.connect();
    } catch (error) {
      if (!isConnectionError(error)) throw error;
      onReplicaFailure(route, error);
      return primary.connect();
    }
  };
  return new Proxy(primary, {
    get(target, property) {
      if (property === 'query') return query;
      if (property === 'connect') return connect;
      if (property === CURRENT_POOL) return routeOf() ? replica : target;
      if (property === 'options') return (routeOf() ? replica : target).options;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The concrete pool a request's queries run on now: code that opens connections of its
 * own from the pool's options later (an export's side connection, a cancel) must reach
 * the same server even when it runs outside the request's async context.
 */
export function currentPool(pool: Pool): Pool {
  return ((pool as unknown as Record<symbol, Pool | undefined>)[CURRENT_POOL] ?? pool) as Pool;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
