import { deviceTopic, type BatchEntry, type DeviceMessageType, type ReadingType } from '@gantry/contracts';

/** One message a simulated device publishes. */
export interface SimulatedMessage {
  deviceId: string;
  type: DeviceMessageType;
  /** Device time (epoch ms): the reading's ts, and the pacing clock of real-time playback. */
  ts: number;
  /** The JSON payload (an object, or an array for `batch`). */
  payload: unknown;
  /** Exact topic instead of gantry/v1/devices/{deviceId}/{type} (bad-input drills). */
  topic?: string;
  /** Exact payload bytes instead of JSON (bad-input drills). */
  raw?: string | Buffer;
  qos?: 0 | 1;
}

export function encodeMessage(message: SimulatedMessage): { topic: string; payload: string | Buffer } {
  return {
    topic: message.topic ?? deviceTopic(message.deviceId, message.type),
    payload: message.raw ?? JSON.stringify(message.payload),
  };
}

/** A reading message (not a batch) as a batch entry: its payload plus its type. */
export function toBatchEntry(message: SimulatedMessage): BatchEntry {
  if (message.type === 'batch') throw new Error('a batch cannot hold a batch');
  return { type: message.type as ReadingType, ...(message.payload as object) } as BatchEntry;
}

/**
 * Store-and-forward: the readings of one device packed into `batch` messages of up to
 * `size` entries, each published at `uploadAt` (epoch ms; the pacing clock).
 */
export function toBatches(
  messages: SimulatedMessage[],
  options: { size?: number; uploadAt?: number } = {},
): SimulatedMessage[] {
  const size = options.size ?? 100;
  const byDevice = new Map<string, SimulatedMessage[]>();
  for (const message of messages) {
    if (message.type === 'batch' || message.raw !== undefined || message.topic !== undefined) continue;
    const list = byDevice.get(message.deviceId) ?? [];
    list.push(message);
    byDevice.set(message.deviceId, list);
  }
  const batches: SimulatedMessage[] = [];
  for (const [deviceId, list] of byDevice) {
    for (let index = 0; index < list.length; index += size) {
      const chunk = list.slice(index, index + size);
      batches.push({
        deviceId,
        type: 'batch',
        ts: options.uploadAt ?? chunk[chunk.length - 1]!.ts,
        payload: chunk.map(toBatchEntry),
      });
    }
  }
  return batches;
}

/** Shifts every message (and its payload ts) by deltaMs: a script recorded "yesterday", say. */
export function shiftMessages(messages: SimulatedMessage[], deltaMs: number): SimulatedMessage[] {
  const shift = (payload: unknown): unknown => {
    if (Array.isArray(payload)) return payload.map(shift);
    if (payload && typeof payload === 'object' && 'ts' in payload) {
      const ts = (payload as { ts: unknown }).ts;
      const moved =
        typeof ts === 'number'
          ? ts + deltaMs
          : typeof ts === 'string'
            ? new Date(Date.parse(ts) + deltaMs).toISOString()
            : ts;
      return { ...payload, ts: moved };
    }
    return payload;
  };
  return messages.map((message) => ({ ...message, ts: message.ts + deltaMs, payload: shift(message.payload) }));
}
