/**
 * Answers that are expensive because they read the present — the live count of the open
 * hour scans every message received in it — shared between requests that ask the same
 * question:
 *
 * - a question already being answered is not asked again: later callers wait for the
 *   same answer (single flight);
 * - an answer that took at least `slowMs` to compute is reused for `reuseFactor` times
 *   its computation time, at most `maxReuseMs`, so under load the database spends at
 *   most about 1 / (1 + reuseFactor) of its time on one question. Quick answers are
 *   never reused: on a quiet system every request reads the present.
 *
 * Per process, bounded to `maxEntries` keys; a failed computation is forgotten at once.
 */
import { createHash } from 'node:crypto';

/** A range ending this close to now is about the present: its answer may be shared. */
export const PRESENT_MS = 60_000;

export const reachesPresent = (toMs: number): boolean => toMs >= Date.now() - PRESENT_MS;

/** A short, order-independent key part for a set of ids (a scope's devices or assets). */
export function idSetKey(ids: readonly string[]): string {
  return createHash('sha1')
    .update([...ids].sort().join(','))
    .digest('base64url');
}

export interface SharedAnswerOptions {
  slowMs?: number;
  reuseFactor?: number;
  maxReuseMs?: number;
  maxEntries?: number;
  now?: () => number;
}

interface Entry<T> {
  promise: Promise<T>;
  /** Until when a finished answer is reused; null while it is being computed. */
  reuseUntil: number | null;
}

export interface SharedAnswers<T> {
  get(key: string, compute: () => Promise<T>): Promise<T>;
  readonly size: number;
}

export function sharedAnswers<T>(options: SharedAnswerOptions = {}): SharedAnswers<T> {
  const slowMs = options.slowMs ?? 250;
  const reuseFactor = options.reuseFactor ?? 4;
  const maxReuseMs = options.maxReuseMs ?? 30_000;
  const maxEntries = options.maxEntries ?? 1000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry<T>>();

  const prune = (at: number) => {
    for (const [key, entry] of entries) {
      if (entry.reuseUntil !== null && entry.reuseUntil <= at) entries.delete(key);
    }
    // Still full of answers being computed or reused: the oldest go first.
    for (const key of entries.keys()) {
      if (entries.size < maxEntries) break;
      entries.delete(key);
    }
  };

  return {
    get size() {
      return entries.size;
    },
    get(key, compute) {
      const started = now();
      const known = entries.get(key);
      if (known && (known.reuseUntil === null || known.reuseUntil > started)) return known.promise;
      if (entries.size >= maxEntries) prune(started);
      const entry: Entry<T> = { promise: compute(), reuseUntil: null };
      entries.set(key, entry);
      entry.promise.then(
        () => {
          if (entries.get(key) !== entry) return;
          const finished = now();
          const took = finished - started;
          if (took < slowMs) entries.delete(key);
          else entry.reuseUntil = finished + Math.min(maxReuseMs, took * reuseFactor);
        },
        () => {
          if (entries.get(key) === entry) entries.delete(key);
        },
      );
      return entry.promise;
    },
  };
}
