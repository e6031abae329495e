import type { WorkerLoop } from '../../loop.ts';
import { PRESENT_RELATIONS } from './present.ts';
import { refreshGold, refreshPlans, type GoldDeps } from './refresh.ts';

/**
 * Keeps the gold relations current that nothing else keeps: applies the invalidation log
 * every GANTRY_GOLD_REFRESH_MS, at once again while a backlog remains — positions in
 * TimescaleDB mode; in PostgreSQL mode ingest keeps them by differences and the log holds
 * only a replay's minutes (services/ingest/src/storage/positions.ts). Utilization is kept elsewhere (TimescaleDB mode: present.ts after each
 * derivation commit, so the two loops never contend for one relation; PostgreSQL mode: by
 * differences in the derivation transaction, deltas.ts), so here it is only rebuilt when
 * installed or changed, in PostgreSQL mode.
 */
export function goldRefreshLoop(deps: GoldDeps & { refreshMs: number }): WorkerLoop {
  const only = refreshPlans
    .map((plan) => plan.base)
    .filter((base) => deps.storageMode !== 'timescaledb' || !PRESENT_RELATIONS.includes(base));
  return {
    name: 'gold-refresh',
    idleMs: deps.refreshMs,
    async runOnce() {
      const result = await refreshGold(deps, { only });
      return result.more ? result.applied : 0;
    },
  };
}
