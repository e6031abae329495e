import type { WorkerLoop } from '../../loop.ts';
import { derivationMetrics } from './metrics.ts';
import { countDirtyDevices, pruneCheckpoints, queueDueRechecks } from './repository.ts';
import { deriveDirtyDevices, type DerivationDeps } from './service.ts';

const RECHECK_EVERY_MS = 5_000;
const PRUNE_EVERY_MS = 3_600_000;
/** Hourly checkpoints older than this are thinned to one per day. */
const HOURLY_CHECKPOINT_DAYS = 3;

/**
 * Derivation: while devices are dirty, derive them a batch at a time; every few
 * seconds queue devices whose open sessions fall due to time out; hourly, thin old
 * checkpoints.
 */
export function derivationLoop(deps: DerivationDeps): WorkerLoop {
  let lastRecheck = 0;
  let lastPrune = 0;
  return {
    name: 'derivation',
    idleMs: deps.config.worker.pollMs,
    async runOnce() {
      const now = Date.now();
      if (now - lastRecheck >= RECHECK_EVERY_MS) {
        lastRecheck = now;
        await queueDueRechecks(deps.pool);
        derivationMetrics.dirtyDevices.set(await countDirtyDevices(deps.pool));
      }
      if (now - lastPrune >= PRUNE_EVERY_MS) {
        lastPrune = now;
        await pruneCheckpoints(deps.pool, HOURLY_CHECKPOINT_DAYS);
      }
      const run = await deriveDirtyDevices(deps);
      return run.devices;
    },
  };
}
