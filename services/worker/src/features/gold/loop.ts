import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerLoop } from '../../loop.ts';
import { PRESENT_RELATIONS } from './present.ts';
import { refreshGold, refreshPlans, type GoldDeps } from './refresh.ts';

/**
 * Pause after a step that applied log rows: derivation may be logging more (a late
 * upload logs its minutes run after run), so the next step follows within a second
 * instead of the idle interval, and gold trails derivation by about one step.
 */
const FOLLOW_MS = 1_000;

/**
 * Keeps the gold relations current that nothing else keeps: applies the invalidation log
 * every GANTRY_GOLD_REFRESH_MS, and again within FOLLOW_MS after a step that applied
 * something — positions in TimescaleDB mode; in PostgreSQL mode ingest keeps them by
 * differences and the log holds only a replay's minutes
 * (services/ingest/src/storage/positions.ts). Utilization is kept elsewhere (TimescaleDB
 * mode: present.ts after each derivation commit, so the two loops never contend for one
 * relation; PostgreSQL mode: by differences in the derivation transaction, deltas.ts), so
 * here it is only rebuilt when installed or changed, in PostgreSQL mode.
 */
export function goldRefreshLoop(deps: GoldDeps & { refreshMs: number }): WorkerLoop {
  const only = refreshPlans
    .map((plan) => plan.base)
    .filter((base) => deps.storageMode !== 'timescaledb' || !PRESENT_RELATIONS.includes(base));
  const stopping = new AbortController();
  return {
    name: 'gold-refresh',
    idleMs: deps.refreshMs,
    async runOnce() {
      const result = await refreshGold(deps, { only });
      if (result.applied === 0) return 0;
      if (!result.more)
        await sleep(Math.min(FOLLOW_MS, deps.refreshMs), undefined, { signal: stopping.signal }).catch(() => undefined);
      return result.applied;
    },
    interrupt() {
      stopping.abort();
    },
  };
}
