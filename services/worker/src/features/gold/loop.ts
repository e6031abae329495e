import type { WorkerLoop } from '../../loop.ts';
import { PRESENT_RELATIONS } from './present.ts';
import { refreshGold, refreshPlans, type GoldDeps } from './refresh.ts';

/** The relations the present refresher (present.ts) does not keep: positions. */
const CADENCE_RELATIONS = refreshPlans.map((plan) => plan.base).filter((base) => !PRESENT_RELATIONS.includes(base));

/**
 * Keeps the gold relations that the present refresher does not keep current in both
 * storage modes: applies the invalidation log every GANTRY_GOLD_REFRESH_MS, at once again
 * while a backlog remains. Utilization follows derivation commits in present.ts instead,
 * so the two loops never contend for the same relation.
 */
export function goldRefreshLoop(deps: GoldDeps & { refreshMs: number }): WorkerLoop {
  return {
    name: 'gold-refresh',
    idleMs: deps.refreshMs,
    async runOnce() {
      const result = await refreshGold(deps, { only: CADENCE_RELATIONS });
      return result.more ? result.applied : 0;
    },
  };
}
