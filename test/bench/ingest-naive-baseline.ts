/**
 * Child process of the ingest benchmark: the naive design for scale — each message
 * parsed with the same steps, then stored with one INSERT (silver and bronze in one
 * statement, its own commit) before its PUBACK, one message at a time.
 * Env: DATABASE_URL, MQTT_URL. Prints "ready" once subscribed.
 */
import mqtt from 'mqtt';
import pg from 'pg';
import { parseMessage } from '@gantry/ingest';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
const devices = new Map<string, { id: string; tenantId: string; assetId: string | null }>();
for (const row of (await pool.query('SELECT device_id, id, tenant_id, asset_id FROM devices')).rows) {
  devices.set(row.device_id, { id: row.id, tenantId: row.tenant_id, assetId: row.asset_id });
}

const insert = `/* bench:naiveInsert */
WITH reading AS (
  INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, ignition, latitude, longitude, speed_kmh, heading, hdop, satellites, fix, gps_valid, adc_on, hourmeter, peak_g, identifier, battery_v)
  SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20 WHERE $4::text IS NOT NULL
  ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO device_messages (received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error, device_ts, reading_count, payload_size, payload)
SELECT $6, $21, $22, $2, $1, $3, $23, CASE WHEN $24::text IS NOT NULL THEN 'rejected' WHEN EXISTS (SELECT 1 FROM reading) THEN 'accepted' ELSE 'duplicate' END,
       $24, $5, (SELECT count(*) FROM reading), $25, $26`;

const client = mqtt.connect(process.env.MQTT_URL!, {
  protocolVersion: 5,
  clean: true,
  clientId: `gantry-bench-naive-${process.pid}`,
  reconnectPeriod: 0,
  log: () => undefined,
});
// The obvious design: acknowledge (call back) only after the INSERT committed.
client.handleMessage = (packet, callback) => {
  const receivedAt = Date.now();
  const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
  const message = parseMessage(
    { topic: packet.topic, payload, receivedAt },
    { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now: receivedAt } },
  );
  const device = message.deviceKey ? devices.get(message.deviceKey) : undefined;
  const reading = device ? message.readings[0] : undefined;
  const r = reading as Record<string, unknown> | undefined;
  pool
    .query(insert, [
      device?.tenantId ?? null,
      device?.id ?? null,
      device?.assetId ?? null,
      reading?.type ?? null,
      reading ? new Date(reading.ts) : null,
      new Date(receivedAt),
      r?.ignition ?? null,
      r?.lat ?? null,
      r?.lon ?? null,
      r?.speedKmh ?? null,
      r?.heading ?? null,
      r?.hdop ?? null,
      r?.satellites ?? null,
      r?.fix ?? null,
      reading?.type === 'gps' ? true : null,
      reading?.type === 'adcin' ? r?.state === 'on' : null,
      r?.value ?? null,
      r?.peakG ?? null,
      r?.identifier ?? null,
      r?.batteryV ?? null,
      packet.topic,
      message.deviceKey,
      message.messageType,
      message.rejection?.reason ?? (device ? null : 'unknown_device'),
      payload.length,
      payload,
    ])
    .then(
      () => callback(),
      (error: Error) => {
        console.error(error.message);
        process.exit(1);
      },
    );
};
client.on('connect', () => {
  client.subscribe('gantry/v1/devices/#', { qos: 1 }, () => console.log('ready'));
});
