import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerLoop } from '../../loop.ts';
import { refreshGold, type GoldDeps } from './refresh.ts';

/**
 * After a step that refreshed buckets older than LATE_MS (late data: an upload of a
 * tracker's buffer is logged run after run while derivation works through it), the next
 * step follows within FOLLOW_MS instead of the idle interval, so gold trails derivation
 * by about one step. Live traffic's minutes keep the idle interval: refreshing the open
 * minutes every second would read them again five times as often.
 */
const FOLLOW_MS = 1_000;
const LATE_MS = 3_600_000;

/**
 * Keeps the gold relations current that nothing else keeps: applies the invalidation log
 * every GANTRY_GOLD_REFRESH_MS, at once while a backlog remains and within FOLLOW_MS
 * after a step that refreshed late data — positions in TimescaleDB mode; in PostgreSQL
 * mode ingest keeps them by differences and the log holds only a replay's minutes
 * (services/ingest/src/storage/positions.ts). Utilization is kept by differences in the
 * derivation transaction (deltas.ts), so here it is only rebuilt when installed or changed.
 */
export function goldRefreshLoop(deps: GoldDeps & { refreshMs: number }): WorkerLoop {
  const stopping = new AbortController();
  return {
    name: 'gold-refresh',
    idleMs: deps.refreshMs,
    async runOnce() {
      const result = await refreshGold(deps);
      if (result.more) return result.applied;
      const late = result.earliest !== null && result.earliest < Date.now() - LATE_MS;
      if (!late) return 0;
      await sleep(Math.min(FOLLOW_MS, deps.refreshMs), undefined, { signal: stopping.signal }).catch(() => undefined);
      return result.applied;
    },
    interrupt() {
      stopping.abort();
    },
  };
}
