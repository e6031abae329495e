import type { Config } from '@gantry/config';
import type { Pool } from '@gantry/db';
import { destination, historyBatches, type LatLon, type SimulatedMessage } from '@gantry/simulator';
import { parseRaw, writeParsed } from './ingest.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const YARD: LatLon = { lat: 51.9496, lon: 4.1453 };

export interface LateHistoryOptions {
  deviceIds: string[];
  /** Device time the history ends at (epoch ms, a whole minute). */
  end: number;
  days: number;
  /** Minutes between fixes of the machine at this index (default 1: every minute). */
  gpsEveryMinutes?: (index: number) => number;
}

/**
 * A machine's month as its tracker buffered it: a valid fix every minute of every day
 * (so each minute has a position; `gpsEveryMinutes` thins them), ignition on from 06:00
 * to 22:00 UTC, driving the first 20 minutes of each running hour, a lift at :05 and a
 * set-down at :35, and an hourmeter reading every 5 minutes while running.
 * Deterministic per device index.
 */
export function lateHistory(options: LateHistoryOptions): SimulatedMessage[] {
  const start = options.end - options.days * 24 * HOUR;
  const messages: SimulatedMessage[] = [];
  options.deviceIds.forEach((deviceId, index) => {
    let here = destination(YARD, 50 * index, 90);
    let hourmeter = 3_600_000 + index * 7_200;
    const gpsEvery = options.gpsEveryMinutes?.(index) ?? 1;
    // A few seconds apart per machine, so the fleet's fixes do not share instants.
    for (let ts = start + (index % 50) * 1000; ts < options.end; ts += MINUTE) {
      const hour = new Date(ts).getUTCHours();
      const minute = new Date(ts).getUTCMinutes();
      const running = hour >= 6 && hour < 22;
      const moving = running && minute < 20;
      if (moving) here = destination(here, 300, (minute * 37 + index * 11) % 360);
      if (minute % gpsEvery === 0)
        messages.push({
          deviceId,
          type: 'gps',
          ts,
          payload: {
            ts,
            ignition: running,
            lat: here.lat,
            lon: here.lon,
            speedKmh: moving ? 18 : 0,
            hdop: 0.9,
            fix: true,
          },
        });
      if (running && (minute === 5 || minute === 35))
        messages.push({
          deviceId,
          type: 'adcin',
          ts: ts + 1,
          payload: { ts: ts + 1, state: minute === 5 ? 'on' : 'off' },
        });
      if (running && minute % 5 === 0) {
        hourmeter += 300;
        messages.push({ deviceId, type: 'hourmeter', ts: ts + 2, payload: { ts: ts + 2, value: hourmeter } });
      }
    }
  });
  return messages;
}

/**
 * The history uploaded late through ingest's real path: store-and-forward `batch`
 * messages of 300 readings, parsed as ingest parses them (arrival `uploadAt`) and
 * written `perTransaction` at a time by writeBatch, each in one committed transaction.
 * Returns the number of batch messages and each transaction's time (ms).
 */
export async function uploadLate(
  pool: Pool,
  config: Config,
  messages: SimulatedMessage[],
  options: { uploadAt: number; perTransaction?: number },
): Promise<{ messages: number; transactionMs: number[] }> {
  const batches = historyBatches(messages, options.uploadAt);
  const perTransaction = options.perTransaction ?? 20;
  const transactionMs: number[] = [];
  for (let index = 0; index < batches.length; index += perTransaction) {
    const parsed = batches.slice(index, index + perTransaction).map((batch) =>
      parseRaw(config, {
        topic: `gantry/v1/devices/${batch.deviceId}/batch`,
        payload: Buffer.from(JSON.stringify(batch.payload)),
        receivedAt: options.uploadAt,
      }),
    );
    const started = performance.now();
    await writeParsed(pool, parsed, 'unnest');
    transactionMs.push(performance.now() - started);
  }
  return { messages: batches.length, transactionMs };
}
