import { describe, expect, it } from 'vitest';
import { DEVICE_SUBJECTS, topicOfSubject } from './jetstream-source.ts';

describe('NATS subjects of MQTT topics', () => {
  it('reads the device topic back from the subject NATS stored it under', () => {
    expect(topicOfSubject('$MQTT.msgs.gantry.v1.devices.ST-0042.gps')).toBe('gantry/v1/devices/ST-0042/gps');
  });

  it('consumes the device topics only', () => {
    expect(DEVICE_SUBJECTS).toBe('$MQTT.msgs.gantry.v1.devices.>');
  });
});
