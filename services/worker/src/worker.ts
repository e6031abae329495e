import type { Config } from '@gantry/config';
import type { Outbox, Pool, StorageMode } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { runLoop, type RunningLoop } from './loop.ts';
import { workerLoops } from './loops.ts';

export interface WorkerDeps {
  config: Config;
  pool: Pool;
  logger: Logger;
  outbox: Outbox;
  storageMode: StorageMode;
}

export interface RunningWorker {
  stop(): Promise<void>;
}

/** Starts every worker loop; stop() lets each finish its current step. */
export function startWorker(deps: WorkerDeps): RunningWorker {
  const logger = deps.logger.child({ component: 'worker' });
  const running: RunningLoop[] = workerLoops(deps).map((loop) => runLoop(loop, logger));
  logger.info('worker started');
  return {
    async stop() {
      await Promise.all(running.map((loop) => loop.stop()));
      logger.info('worker stopped');
    },
  };
}
