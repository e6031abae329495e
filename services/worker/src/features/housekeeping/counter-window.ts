import { advanceCounterWindow, type Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import type { WorkerLoop } from '../../loop.ts';

/** How often the window is checked: it moves within seconds of an hour closing. */
const CHECK_MS = 5_000;

/**
 * Keeps data quality's counter window on the 24 hours before the open one
 * (packages/db/src/counter-window.ts): when an hour closes, the hour that left is taken
 * away and the one that closed is added; a window missing or far behind is built whole.
 * Until it has moved, a request for the default range sums the hourly counters instead.
 */
export function counterWindowLoop(deps: { pool: Pool; logger: Logger }): WorkerLoop {
  return {
    name: 'counter-window',
    idleMs: CHECK_MS,
    async runOnce() {
      const moved = await advanceCounterWindow(deps.pool);
      if (moved.rebuilt) deps.logger.info({ hours: moved.hours }, 'counter window built');
      // Done for this hour: the next check is an idle one.
      return 0;
    },
  };
}
