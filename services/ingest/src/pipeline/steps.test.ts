import { describe, expect, it } from 'vitest';
import { parseMessage, type RawMessage } from './steps.ts';

const now = Date.parse('2026-03-10T12:00:00Z');
const options = { maxPayloadBytes: 1024, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now } };

function raw(type: string, payload: unknown, deviceId = 'sc-01'): RawMessage {
  return {
    topic: `gantry/v1/devices/${deviceId}/${type}`,
    payload: Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload)),
    receivedAt: now,
  };
}

describe('parse steps', () => {
  it('rejects a lone surrogate escape as invalid_utf8, naming the field, and keeps an escaped pair', () => {
    const batch = `[{"type":"heartbeat","ts":${now}},{"type":"identifier","ts":${now},"identifier":"\\uD83D"}]`;
    expect(parseMessage(raw('batch', batch), options).rejection).toEqual({
      reason: 'invalid_utf8',
      detail: '[1].identifier: a lone surrogate escape (\\uD800–\\uDFFF without its pair) is not UTF-8 text',
    });
    const paired = parseMessage(raw('identifier', `{"ts":${now},"identifier":"OP-\\ud83d\\ude00"}`), options);
    expect(paired.rejection).toBeNull();
    expect(paired.readings[0]).toMatchObject({ identifier: 'OP-😀' });
  });

  it('turns a gps payload into a reading with ts in epoch ms and fix defaulting to true', () => {
    const message = parseMessage(
      raw('gps', { ts: '2026-03-10T11:59:58.250Z', lat: 51.95, lon: 4.05, speedKmh: 7 }),
      options,
    );
    expect(message.rejection).toBeNull();
    expect(message.readings).toEqual([{ type: 'gps', ts: now - 1750, lat: 51.95, lon: 4.05, speedKmh: 7, fix: true }]);
    expect(message).toMatchObject({ deviceKey: 'sc-01', messageType: 'gps', deviceTs: now - 1750 });
  });

  it.each([
    ['an offset', '2026-03-10T13:59:58+02:00', now - 2000],
    ['a space and microseconds', '2026-03-10 11:59:58.123456Z', now - 1877],
    ['epoch milliseconds', now - 5000, now - 5000],
  ])('reads ts given with %s', (_label, ts, expected) => {
    expect(parseMessage(raw('heartbeat', { ts }), options).readings[0]?.ts).toBe(expected);
  });

  it.each([
    ['unknown_topic', { topic: 'gantry/v1/devices/sc-01', payload: Buffer.from('{}'), receivedAt: now }],
    ['unknown_message_type', raw('temperature', { ts: now })],
    ['unknown_device', raw('gps', { ts: now }, 'bad id with spaces')],
    ['payload_too_large', raw('heartbeat', { ts: now, firmware: 'x'.repeat(2000) })],
    ['invalid_utf8', { topic: 'gantry/v1/devices/sc-01/gps', payload: Buffer.from([0xc3, 0x28]), receivedAt: now }],
    ['invalid_utf8', raw('identifier', `{"ts":${now},"identifier":"OP-\\ud800"}`)],
    ['invalid_utf8', raw('gps', `{"ts":${now},"lat":1,"lon":2,"note":"\\udfff"}`)],
    ['invalid_json', raw('gps', '{"ts":')],
    ['invalid_payload', raw('gps', '"just a string"')],
    ['missing_field', raw('gps', { ts: now, lat: 1 })],
    ['missing_field', raw('gps', { lat: 1, lon: 2 })],
    ['invalid_field_type', raw('imu', { ts: now, peakG: '2' })],
    ['invalid_field_value', raw('identifier', { ts: now, identifier: 'OP-1', event: 'shift' })],
    ['invalid_field_value', raw('identifier', { ts: now, identifier: 'OP\u00001' })],
    ['value_out_of_range', raw('gps', { ts: now, lat: 1, lon: 2, satellites: 300 })],
    ['value_out_of_range', raw('identifier', { ts: now, identifier: '' })],
    ['invalid_coordinates', raw('gps', { ts: now, lat: -91, lon: 2 })],
    ['invalid_coordinates', raw('gps', { ts: now, lat: 1, lon: null })],
    ['invalid_timestamp', raw('gps', { ts: '2026-02-30T00:00:00Z', lat: 1, lon: 2 })],
    ['invalid_timestamp', raw('gps', { ts: 'NaN', lat: 1, lon: 2 })],
    ['future_timestamp', raw('gps', { ts: now + 301_000, lat: 1, lon: 2 })],
    ['stale_timestamp', raw('gps', { ts: now - 401 * 86_400_000, lat: 1, lon: 2 })],
    ['empty_batch', raw('batch', [])],
    ['invalid_payload', raw('batch', { type: 'gps' })],
  ])('rejects with %s', (reason, message) => {
    const parsed = parseMessage(message, options);
    expect(parsed.rejection?.reason).toBe(reason);
    expect(parsed.rejection?.detail).toEqual(expect.any(String));
    expect(parsed.readings).toEqual([]);
  });

  it('names the field and the value in the detail', () => {
    const parsed = parseMessage(raw('gps', { ts: now, lat: 95.5, lon: 2 }), options);
    expect(parsed.rejection?.detail).toMatch(/^lat: .*90.*\(got 95\.5\)$/);
  });

  it('keeps the device time of a rejected message when its ts parses', () => {
    expect(parseMessage(raw('gps', { ts: now - 60_000, lat: 'x', lon: 2 }), options).deviceTs).toBe(now - 60_000);
  });

  it('keeps the good entries of a batch, lists the bad ones, and dates it by its newest entry', () => {
    const parsed = parseMessage(
      raw('batch', [
        { type: 'gps', ts: now - 3000, lat: 1, lon: 2 },
        { type: 'gps', ts: now - 2000, lat: 100, lon: 2 },
        { type: 'thermometer', ts: now - 1000 },
        { ts: now - 1000 },
        'not an object',
        { type: 'hourmeter', ts: now - 1000, value: 10 },
      ]),
      options,
    );
    expect(parsed.rejection).toBeNull();
    expect(parsed.readings.map((reading) => reading.type)).toEqual(['gps', 'hourmeter']);
    expect(parsed.entryRejections.map((entry) => [entry.index, entry.reason])).toEqual([
      [1, 'invalid_coordinates'],
      [2, 'unknown_message_type'],
      [3, 'missing_field'],
      [4, 'invalid_payload'],
    ]);
    expect(parsed.deviceTs).toBe(now - 1000);
  });

  it("rejects a batch whose every entry is bad with the first entry's reason", () => {
    const parsed = parseMessage(raw('batch', [{ type: 'gps', ts: now + 3_600_000, lat: 1, lon: 2 }]), options);
    expect(parsed.rejection?.reason).toBe('future_timestamp');
    expect(parsed.rejection?.detail).toMatch(/^every entry was rejected; entry 0: ts /);
  });
});
