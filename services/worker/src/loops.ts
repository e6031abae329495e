import type { WorkerDeps } from './worker.ts';
import type { WorkerLoop } from './loop.ts';
import { derivationLoop } from './features/derivation/loop.ts';
import { goldRefreshLoop } from './features/gold/loop.ts';
import { presentRefresher } from './features/gold/present.ts';
import { housekeepingLoop } from './features/housekeeping/loop.ts';
import { webhookDeliveryLoop } from './features/webhooks/loop.ts';

/** Every kind of background work the worker runs, feature by feature. */
export function workerLoops(deps: WorkerDeps): WorkerLoop[] {
  const present = presentRefresher(deps);
  return [
    housekeepingLoop(deps),
    webhookDeliveryLoop(deps),
    derivationLoop({ ...deps, afterCommit: present.notify }),
    present.loop,
    goldRefreshLoop({ ...deps, refreshMs: deps.config.worker.goldRefreshMs }),
  ];
}
