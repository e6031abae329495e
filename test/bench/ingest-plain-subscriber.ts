/**
 * Child process of the ingest benchmark: a plain mqtt.js QoS 1 subscriber (automatic
 * PUBACK, no database) that counts messages, to measure what the broker relays.
 * Env: MQTT_URL, EXPECT, MQTT_PROTOCOL_VERSION (5; 4 for brokers speaking MQTT 3.1.1 only, as NATS). Prints "ready" once subscribed, then one JSON line when done.
 */
import mqtt from 'mqtt';

const expected = Number(process.env.EXPECT);
const version = process.env.MQTT_PROTOCOL_VERSION === '4' ? 4 : 5;
const client = mqtt.connect(process.env.MQTT_URL!, {
  protocolVersion: version,
  clean: true,
  clientId: `gantry-bench-plain-${process.pid}`,
  ...(version === 5 ? { properties: { receiveMaximum: 20000 } } : {}),
  reconnectPeriod: 0,
  log: () => undefined,
});
let received = 0;
let first = 0;
client.on('connect', () => {
  client.subscribe('gantry/v1/devices/#', { qos: 1 }, (error) => {
    if (error) {
      console.error(error.message);
      process.exit(1);
    }
    console.log('ready');
  });
});
client.on('message', () => {
  received += 1;
  if (received === 1) first = performance.timeOrigin + performance.now();
  if (received === expected) {
    console.log(JSON.stringify({ received, firstAt: first, lastAt: performance.timeOrigin + performance.now() }));
    client.end(false, {}, () => process.exit(0));
  }
});
