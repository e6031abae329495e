import type { WorkerDeps } from './worker.ts';
import type { WorkerLoop } from './loop.ts';
import { derivationLoop } from './features/derivation/loop.ts';
import { goldRefreshLoop } from './features/gold/loop.ts';
import { counterWindowLoop } from './features/housekeeping/counter-window.ts';
import { housekeepingLoop } from './features/housekeeping/loop.ts';
import { tableMaintenanceLoop } from './features/housekeeping/table-maintenance.ts';
import { webhookDeliveryLoop } from './features/webhooks/loop.ts';

/** Every kind of background work the worker runs, feature by feature. */
export function workerLoops(deps: WorkerDeps): WorkerLoop[] {
  // Utilization gold is kept in the derivation transaction itself (features/gold/deltas.ts).
  return [
    housekeepingLoop(deps),
    counterWindowLoop(deps),
    tableMaintenanceLoop(deps),
    webhookDeliveryLoop(deps),
    // Several loops, each claiming its own devices (advisory locks, as several workers do):
    // one loop's database work overlaps another's derivation in Node.
    ...Array.from({ length: deps.config.worker.derivationLoops }, (_, index) => derivationLoop(deps, index)),
    goldRefreshLoop({ ...deps, refreshMs: deps.config.worker.goldRefreshMs }),
  ];
}
