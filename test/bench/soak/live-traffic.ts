import { fleetTraffic, type SimulatedMessage } from '@gantry/simulator';

/**
 * fleetTraffic as a live fleet: `rate` messages/s in total for `seconds`, generated one
 * at a time as the publisher asks (never the whole run in memory), each stamped with the
 * wall-clock time it is taken for publishing, so device time ≈ now and ingest lag
 * (received − device time) measures broker and ingest, not the script. A device's
 * stamps strictly increase, so every (device, type, ts) stays distinct.
 */
export function* liveFleetTraffic(options: {
  deviceIds: string[];
  rate: number;
  seconds: number;
  seed?: number;
}): Generator<SimulatedMessage> {
  const count = Math.ceil(options.rate * options.seconds);
  // The generator's own clock then advances at the same pace as the stamps (for the
  // hourmeter and uptime values it derives from it).
  const stepMs = (options.deviceIds.length * 1000) / options.rate;
  const last = new Map<string, number>();
  const traffic = fleetTraffic({
    deviceIds: options.deviceIds,
    count,
    start: Date.now(),
    stepMs,
    seed: options.seed ?? 7,
  });
  for (const message of traffic) {
    const ts = Math.max(Date.now(), (last.get(message.deviceId) ?? 0) + 1);
    last.set(message.deviceId, ts);
    yield {
      ...message,
      ts,
      payload: { ...(message.payload as Record<string, unknown>), ts: new Date(ts).toISOString() },
    };
  }
}
