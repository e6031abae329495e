import type { Logger } from '@gantry/logger';
import { isConnectionError } from '@gantry/db';

/**
 * One kind of background work. runOnce does a bounded amount of work and says how
 * much; the runner calls it again at once while there is work, and waits idleMs when
 * there is none.
 */
export interface WorkerLoop {
  name: string;
  idleMs: number;
  runOnce(): Promise<number>;
  /** Called once when the worker stops (close connections, finish in-flight work). */
  stop?(): Promise<void>;
  /** The worker is stopping: cut a long step short (runOnce is awaited before stop). */
  interrupt?(): void;
}

export interface RunningLoop {
  stop(): Promise<void>;
}

/** Runs a loop until stopped; errors are logged and retried with backoff, never fatal. */
export function runLoop(loop: WorkerLoop, logger: Logger): RunningLoop {
  let stopping = false;
  let wake: (() => void) | null = null;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const log = logger.child({ loop: loop.name });
  const done = (async () => {
    let failures = 0;
    while (!stopping) {
      try {
        const work = await loop.runOnce();
        failures = 0;
        if (work === 0 && !stopping) await sleep(loop.idleMs);
      } catch (error) {
        failures += 1;
        const backoff = Math.min(30_000, 250 * 2 ** Math.min(failures, 7));
        if (isConnectionError(error)) log.warn({ err: error, backoffMs: backoff }, 'database unreachable; retrying');
        else log.error({ err: error, backoffMs: backoff }, 'worker loop failed; retrying');
        if (!stopping) await sleep(backoff);
      }
    }
  })();
  return {
    async stop() {
      stopping = true;
      wake?.();
      loop.interrupt?.();
      await done;
      await loop.stop?.();
    },
  };
}
