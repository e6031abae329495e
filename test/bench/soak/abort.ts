/** Rejects as soon as the signal aborts (a publisher's flush waits for ever on a dead broker). */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * An AbortController that also aborts when `parent` does. Not AbortSignal.any: on
 * Node 20 a composite holding an AbortSignal.timeout() can be garbage-collected with it
 * and never fire (seen here: a 40 s calibration ran on for 15 minutes).
 */
export function childController(parent: AbortSignal): AbortController {
  const controller = new AbortController();
  if (parent.aborted) controller.abort(parent.reason);
  else parent.addEventListener('abort', () => controller.abort(parent.reason), { once: true });
  return controller;
}
