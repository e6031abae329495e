import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerLoop } from '../../loop.ts';
import { refreshGold, type GoldDeps } from './refresh.ts';

/** Relations over derived data that the API reads the present from. */
export const PRESENT_RELATIONS = ['utilization_hourly'];

export interface PresentRefresher {
  /** Says a derivation committed: its gold buckets are refreshed as soon as possible. */
  notify(): void;
  loop: WorkerLoop;
}

export interface PresentRefresherOptions {
  /** With nothing notified, a refresh runs this often anyway (another worker's derivations, a missed lock). */
  idleMs?: number;
  /**
   * Least time between two refreshes: a continuous aggregate refreshes whole time ranges,
   * all assets of the open hour, so refreshes are spaced.
   */
  minGapMs?: number;
}

/**
 * TimescaleDB mode: keeps the open hour's and day's utilization gold (and the fleet
 * rollup) current: the derivation loop notifies after each commit, and this loop applies
 * the invalidation log at once — every notification that arrives during a refresh is
 * served by the next one, so refreshes follow derivation without queueing up. The
 * five-second gold loop refreshes the other relations (goldRefreshLoop). PostgreSQL mode
 * needs no such loop: derivation keeps utilization gold by differences (deltas.ts).
 */
export function presentRefresher(deps: GoldDeps, options: PresentRefresherOptions = {}): PresentRefresher {
  const idleMs = options.idleMs ?? 1_000;
  const minGapMs = options.minGapMs ?? 1_000;
  let notified = false;
  let stopping = false;
  let wake: (() => void) | null = null;
  let lastRun = 0;

  const waitForWork = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, idleMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  return {
    notify() {
      notified = true;
      wake?.();
    },
    loop: {
      name: 'gold-present',
      idleMs,
      async runOnce() {
        if (!notified && !stopping) await waitForWork();
        wake = null;
        if (stopping) return 0;
        const gap = lastRun + minGapMs - Date.now();
        if (gap > 0) await sleep(gap);
        notified = false;
        lastRun = Date.now();
        const result = await refreshGold(deps, { only: PRESENT_RELATIONS });
        // Another refresher holds the relation (it may have taken the log before this
        // worker's last commit), or a step left work: go again shortly.
        if (result.busy.length > 0) {
          await sleep(50);
          notified = true;
        } else if (result.more) notified = true;
        // This loop paces itself (waitForWork); the runner calls it again at once.
        return 1;
      },
      async stop() {
        stopping = true;
        wake?.();
      },
    },
  };
}
