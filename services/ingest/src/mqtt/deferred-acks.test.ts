import { generate } from 'mqtt-packet';
import { describe, expect, it } from 'vitest';
import { encodePubacks } from './deferred-acks.ts';

describe('PUBACK encoding', () => {
  it('writes for each packet id the bytes mqtt-packet generates, MQTT 5 and 3.1.1', () => {
    const ids = [1, 255, 256, 0x1234, 65535];
    for (const protocolVersion of [4, 5]) {
      const expected = Buffer.concat(
        ids.map((messageId) => generate({ cmd: 'puback', messageId }, { protocolVersion })),
      );
      expect(encodePubacks(ids, protocolVersion).equals(expected)).toBe(true);
    }
  });
});
