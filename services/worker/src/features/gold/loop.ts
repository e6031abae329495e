import type { WorkerLoop } from '../../loop.ts';
import { refreshGold, type GoldDeps } from './refresh.ts';

/**
 * Keeps gold current in both storage modes: applies the invalidation log and closes
 * settled hours every GANTRY_GOLD_REFRESH_MS, at once again while a backlog remains.
 */
export function goldRefreshLoop(deps: GoldDeps & { refreshMs: number }): WorkerLoop {
  return {
    name: 'gold-refresh',
    idleMs: deps.refreshMs,
    async runOnce() {
      const result = await refreshGold(deps);
      return result.more ? result.applied : 0;
    },
  };
}
