import type { Config } from '@gantry/config';
import type { WorkerLoop } from '../../loop.ts';
import { derivationMetrics } from './metrics.ts';
import { countDirtyDevices, pruneCheckpoints, queueDueRechecks } from './repository.ts';
import { deriveDirtyDevices, type DerivationDeps } from './service.ts';

const RECHECK_EVERY_MS = 5_000;
const PRUNE_EVERY_MS = 3_600_000;
/** Checkpoints stay hourly this long (late data within it restarts from its own hour), then daily… */
const HOURLY_CHECKPOINT_DAYS = 3;
/** …this long, then weekly (repository.ts, pruneCheckpoints). */
const DAILY_CHECKPOINT_DAYS = 31;

/**
 * Derivation: while devices are dirty, derive them a batch at a time; every few
 * seconds queue devices whose open sessions fall due to time out; hourly, thin old
 * checkpoints to what late data can use.
 */
export function derivationLoop(
  deps: DerivationDeps & { config: Pick<Config, 'retention'> },
  /** Which of the worker's derivation loops this is: the first also does the rechecks and pruning. */
  index = 0,
): WorkerLoop {
  let lastRecheck = 0;
  let lastPrune = 0;
  return {
    name: index === 0 ? 'derivation' : `derivation-${index + 1}`,
    idleMs: deps.config.worker.pollMs,
    async runOnce() {
      if (index > 0) return (await deriveDirtyDevices(deps)).devices;
      const now = Date.now();
      if (now - lastRecheck >= RECHECK_EVERY_MS) {
        lastRecheck = now;
        await queueDueRechecks(deps.pool);
        derivationMetrics.dirtyDevices.set(await countDirtyDevices(deps.pool));
      }
      if (now - lastPrune >= PRUNE_EVERY_MS) {
        lastPrune = now;
        await pruneCheckpoints(deps.pool, {
          hourlyDays: HOURLY_CHECKPOINT_DAYS,
          dailyDays: DAILY_CHECKPOINT_DAYS,
          readingDays: deps.config.retention.readingDays,
        });
      }
      return (await deriveDirtyDevices(deps)).devices;
    },
  };
}
