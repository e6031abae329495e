import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from '@gantry/db';
import { fleetTraffic, publishMessages, type Publisher } from '@gantry/simulator';
import { abortable } from './abort.ts';
import { countRows } from './probes.ts';
import { scrape, sum } from './prometheus.ts';

export interface Calibration {
  /** Messages per second from the first publish to the last commit. */
  rate: number;
  published: number;
  publishRate: number;
  seconds: number;
}

/** Up to n values of an iterator shared between calls (slices of one long script). */
function* take<T>(iterator: Iterator<T>, n: number): Generator<T> {
  for (let index = 0; index < n; index += 1) {
    const next = iterator.next();
    if (next.done) return;
    yield next.value;
  }
}

/**
 * The maximum end-to-end ingest rate: publish as fast as ingest commits for `seconds`,
 * then wait until every published message is a committed bronze row (counted in the
 * database); rate = messages / time from the first publish to the last commit, the way
 * bench:ingest computes its end-to-end figure. The publisher stays at most `maxBacklog`
 * messages ahead of ingest's committed count (its /metrics): unbounded, it outruns ingest
 * several times over and Mosquitto queues gigabytes (7 GB seen) that then take minutes to
 * drain. Device time starts an hour ago, 10 ms apart per device: the soak removes these
 * rows before it starts.
 */
export async function calibrate(options: {
  pool: Pool;
  publisher: Publisher;
  ingestUrl: string;
  deviceIds: string[];
  seconds: number;
  maxBacklog: number;
  signal: AbortSignal;
}): Promise<Calibration> {
  const { pool, publisher, signal } = options;
  const traffic = fleetTraffic({
    deviceIds: options.deviceIds,
    count: Number.MAX_SAFE_INTEGER,
    start: Date.now() - 3_600_000,
    stepMs: 10,
    seed: 1,
  });
  let committed = 0;
  let polling = true;
  const poller = (async () => {
    while (polling && !signal.aborted) {
      const samples = await scrape(options.ingestUrl);
      if (samples) committed = sum(samples, 'gantry_ingest_messages_stored_total');
      await sleep(200);
    }
  })();
  const started = performance.now();
  const deadline = started + options.seconds * 1000;
  let published = 0;
  try {
    while (performance.now() < deadline) {
      signal.throwIfAborted();
      if (published - committed > options.maxBacklog) {
        await sleep(20, undefined, { signal });
        continue;
      }
      published += await abortable(publishMessages(publisher, take(traffic, 2000), { flush: false }), signal);
    }
    await abortable(publisher.flush(), signal);
  } finally {
    polling = false;
    await poller;
  }
  const publishRate = published / ((performance.now() - started) / 1000);
  for (const timeout = performance.now() + 600_000; ; await sleep(250, undefined, { signal })) {
    if ((await countRows(pool)).bronze >= published) break;
    if (performance.now() > timeout)
      throw new Error('calibration: ingest did not commit every published message within 10 minutes');
  }
  const seconds = (performance.now() - started) / 1000;
  const { silver } = await countRows(pool);
  if (silver !== published) throw new Error(`calibration: ${published} published but ${silver} readings in silver`);
  return { rate: published / seconds, published, publishRate, seconds };
}
