import { setTimeout as sleep } from 'node:timers/promises';
import { encodeMessage, type SimulatedMessage } from './messages.ts';
import type { Publisher } from './publisher.ts';

export interface PlaybackOptions {
  /** Messages per second over the whole script (unset or 0: as fast as the broker takes them). */
  rate?: number;
  /** Pace by device time instead: 1 plays in real time, 60 plays a minute per second. */
  speed?: number;
  qos?: 0 | 1;
  signal?: AbortSignal;
  /** Wait for the broker's acknowledgement of everything before resolving (default true). */
  flush?: boolean;
}

/**
 * Publishes a script of messages in order, rate-controlled or paced by device time.
 * Device timestamps are whatever the script says (past, present): playback only decides
 * when each message leaves. Resolves with the number published.
 */
export async function publishMessages(
  publisher: Publisher,
  messages: Iterable<SimulatedMessage>,
  options: PlaybackOptions = {},
): Promise<number> {
  const started = performance.now();
  let firstTs: number | null = null;
  let count = 0;
  for (const message of messages) {
    if (options.signal?.aborted) break;
    let dueMs: number | null = null;
    if (options.rate && options.rate > 0) dueMs = (count / options.rate) * 1000;
    else if (options.speed && options.speed > 0) {
      firstTs ??= message.ts;
      dueMs = (message.ts - firstTs) / options.speed;
    }
    if (dueMs !== null) {
      const wait = dueMs - (performance.now() - started);
      if (wait > 2) await sleep(wait, undefined, { signal: options.signal }).catch(() => undefined);
    }
    const { topic, payload } = encodeMessage(message);
    await publisher.publish(topic, payload, message.qos ?? options.qos ?? 1);
    count += 1;
  }
  if (options.flush !== false) await publisher.flush();
  return count;
}
