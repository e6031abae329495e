import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advanceCounterWindow, counterWindowColumns, counterWindowDrift } from '@gantry/db';
import { createPublisher, fleetTraffic, publishMessages, randomSource } from '@gantry/simulator';
import type { ParsedMessage } from '../../services/ingest/src/pipeline/steps.ts';
import { replayBronze } from '../../services/ingest/src/replay.ts';
import { counterDrift, counterTables, deviceCounterColumns } from '../../services/ingest/src/storage/counters.ts';
import { testConfig } from '../support/api.ts';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { countOf, parseRaw, provisionFleetBulk, uniqueDeviceIds, writeParsed, waitFor } from '../support/ingest.ts';
import { killAllServices, spawnService } from '../support/processes.ts';

const HOUR = 3_600_000;

async function expectCountersEqualRecount(db: TestDatabase): Promise<void> {
  for (const table of counterTables) expect(await counterDrift(db.pool, table), table).toBe(0);
  // And data quality's window over the 24 closed hours equals their counter rows.
  expect(await counterWindowDrift(db.pool), 'device_counts_window').toBe(0);
}

/** `a + b + …` over the per-type columns of messages or of silver readings: every message or every reading of a row. */
const sumOf = (suffix: 'messages' | 'readings') =>
  deviceCounterColumns
    .filter((column) => column.endsWith(`_${suffix}`) && column !== 'timed_messages' && column !== 'delayed_messages')
    .join(' + ');

let db: TestDatabase;
let broker: TestBroker | undefined;

beforeAll(async () => {
  db = await createTestDatabase('ingest_counters');
});

afterAll(async () => {
  await killAllServices();
  await broker?.stop();
  await db?.drop();
});

describe('ingest counters', () => {
  it('equal a recount of bronze and silver after random traffic with duplicates, rejects, late batches, asset moves and replays', async () => {
    const seed = Number(process.env.COUNTERS_TEST_SEED ?? Date.now() % 1_000_000);
    const next = randomSource(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
    const config = testConfig(db.url);
    const deviceIds = uniqueDeviceIds(8, 'count');
    const fleet = await provisionFleetBulk(db.pool, deviceIds.slice(0, 6));
    // One disabled device; two ids unknown until the replay registers them.
    await db.pool.query(`UPDATE devices SET enabled = false WHERE device_id = $1`, [deviceIds[5]]);
    const unknown = deviceIds.slice(6);
    const now = Date.now();
    const sent: Array<{ topic: string; payload: Buffer; receivedAt: number }> = [];
    // The window exists before the traffic: every batch for its hours adds to it.
    await advanceCounterWindow(db.pool);

    function message(): { topic: string; payload: Buffer; receivedAt: number } {
      // Receive times over the last 30 hours; device times up to 3 hours before (late uploads).
      const receivedAt = now - Math.floor(next() * 30 * HOUR);
      const deviceId = next() < 0.08 ? pick(unknown) : pick(deviceIds.slice(0, 6));
      const roll = next();
      if (roll < 0.12 && sent.length > 0) return { ...pick(sent), receivedAt }; // a resend: duplicate
      const ts = receivedAt - Math.floor(next() < 0.3 ? next() * 3 * HOUR : next() * 60_000);
      const reading = (type: string) => {
        switch (type) {
          case 'gps':
            return { ts, lat: 51.9 + next() / 10, lon: 4 + next() / 10, hdop: next() < 0.2 ? 9 : 1, speedKmh: 5 };
          case 'adcin':
            return { ts, state: next() < 0.5 ? 'on' : 'off' };
          case 'hourmeter':
            return { ts, value: Math.floor(next() * 100_000) };
          case 'imu':
            return { ts, peakG: next() * 3, samples: 50 };
          default:
            return { ts, ignition: true, batteryV: 12.5 };
        }
      };
      let type = pick(['gps', 'adcin', 'hourmeter', 'imu', 'heartbeat', 'batch']);
      let payload: unknown;
      if (roll < 0.18)
        payload = '{"ts": 12'; // invalid JSON
      else if (roll < 0.22)
        payload = { ts: receivedAt + 2 * HOUR, lat: 1, lon: 1 }; // future timestamp
      else if (type === 'batch') {
        payload = Array.from({ length: 2 + Math.floor(next() * 3) }, (_, index) => {
          if (next() < 0.15) return { type: 'gps', ts: 'not a time' };
          const entryType = pick(['gps', 'adcin', 'heartbeat']);
          return { type: entryType, ...reading(entryType), ts: ts - index * 1000 };
        });
      } else payload = reading(type);
      if (roll < 0.22) type = 'gps';
      else if (roll < 0.24) type = 'weather'; // not a message type: rejected, counted as `other`
      const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
      const sentMessage = { topic: `gantry/v1/devices/${deviceId}/${type}`, payload: Buffer.from(text), receivedAt };
      sent.push(sentMessage);
      return sentMessage;
    }

    const parse = (raw: { topic: string; payload: Buffer; receivedAt: number }) => parseRaw(config, raw);
    const write = (messages: ParsedMessage[], method: 'unnest' | 'copy') => writeParsed(db.pool, messages, method);

    // Three writers at once, as several ingest processes would be, on the same devices.
    for (let round = 0; round < 10; round += 1) {
      await Promise.all(
        [0, 1, 2].map((writer) =>
          write(
            Array.from({ length: 150 }, () => parse(message())),
            writer % 2 === 0 ? 'unnest' : 'copy',
          ),
        ),
      );
      if (round === 4) {
        // A device moves to another asset: its later rows, and their counts, name the new one.
        await db.pool.query(`UPDATE devices SET asset_id = $1 WHERE id = $2`, [
          fleet.devices[1]!.assetId,
          fleet.devices[0]!.id,
        ]);
      }
    }
    await expectCountersEqualRecount(db);

    // The unknown devices are registered, and replay re-parses what they sent, while
    // traffic goes on; then everything again (duplicates and all).
    await db.pool.query(
      `INSERT INTO devices (tenant_id, device_id, asset_id) SELECT $1, d, $2 FROM unnest($3::text[]) AS d`,
      [fleet.tenantId, fleet.devices[2]!.assetId, unknown],
    );
    const range = { from: new Date(now - 40 * HOUR), to: new Date(now + HOUR) };
    const [first] = await Promise.all([
      replayBronze({ pool: db.pool, config }, { ...range, chunkSize: 97 }),
      write(
        Array.from({ length: 150 }, () => parse(message())),
        'unnest',
      ),
    ]);
    expect(first.changed).toBeGreaterThan(0);
    await expectCountersEqualRecount(db);
    const again = await replayBronze({ pool: db.pool, config }, { ...range, all: true, chunkSize: 250 });
    expect(again.messages).toBeGreaterThan(first.messages);
    await expectCountersEqualRecount(db);

    // The traffic exercised every outcome, and the counters hold all of it.
    const errorOutcomes = await db.pool.query<{ status: string }>(
      `SELECT DISTINCT status FROM message_errors_hourly WHERE message_count > 0 ORDER BY status`,
    );
    expect(errorOutcomes.rows.map((row) => row.status)).toEqual(['partial', 'rejected']);
    expect(
      await countOf(db.pool, `SELECT coalesce(sum(other_messages), 0) AS count FROM device_counts_hourly`),
    ).toBeGreaterThan(0);
    expect(
      await countOf(db.pool, `SELECT coalesce(sum(duplicates), 0) AS count FROM device_counts_hourly`),
    ).toBeGreaterThan(0);
    expect(
      await countOf(db.pool, `SELECT coalesce(sum(${sumOf('messages')}), 0) AS count FROM device_counts_hourly`),
      `seed ${seed}`,
    ).toBe(await countOf(db.pool, `SELECT count(*) FROM device_messages WHERE device_id IS NOT NULL`));
    expect(
      await countOf(db.pool, `SELECT coalesce(sum(${sumOf('readings')}), 0) AS count FROM device_counts_hourly`),
    ).toBe(await countOf(db.pool, `SELECT count(*) FROM telemetry_readings`));
    const hours = await countOf(
      db.pool,
      `SELECT count(DISTINCT bucket) AS count FROM device_counts_hourly WHERE ${sumOf('readings')} > 0`,
    );
    expect(hours).toBeGreaterThan(24);
    // Batches of every kind landed in the window's hours: it holds counts to keep exact.
    expect(
      await countOf(
        db.pool,
        `SELECT coalesce(sum(${counterWindowColumns.join(' + ')}), 0) AS count FROM device_counts_window`,
      ),
    ).toBeGreaterThan(1000);
  }, 120_000);

  it('the counter window moves an hour at a time to the 24 closed hours before the open one, and is built whole when far behind', async () => {
    // The window as it stood some hours ago (its rows summed from the counter rows), then moved on.
    const windowAt = async (hoursBack: number) => {
      await db.pool.query('DELETE FROM device_counts_window');
      const { rows } = await db.pool.query<{ start: Date }>(
        `UPDATE device_counts_window_start
            SET window_start = date_bin(INTERVAL '1 hour', now(), TIMESTAMPTZ '2000-01-01 00:00:00+00') - $1 * INTERVAL '1 hour'
         RETURNING window_start AS start`,
        [24 + hoursBack],
      );
      await db.pool.query(
        `INSERT INTO device_counts_window (tenant_id, device_id, ${counterWindowColumns.join(', ')})
         SELECT tenant_id, device_id, ${counterWindowColumns.map((c) => `sum(${c})`).join(', ')} FROM device_counts_hourly
          WHERE bucket >= $1::timestamptz AND bucket < $1::timestamptz + INTERVAL '24 hours' GROUP BY 1, 2`,
        [rows[0]!.start],
      );
      expect(await counterWindowDrift(db.pool)).toBe(0);
    };
    const moved = advanceCounterWindow;
    const start = async () =>
      (
        await db.pool.query<{ ok: boolean }>(
          `SELECT window_start = date_bin(INTERVAL '1 hour', now(), TIMESTAMPTZ '2000-01-01 00:00:00+00') - INTERVAL '24 hours' AS ok
           FROM device_counts_window_start`,
        )
      ).rows[0]!.ok;

    await windowAt(3);
    expect(await start()).toBe(false);
    expect(await moved(db.pool)).toEqual({ hours: 3, rebuilt: false });
    expect(await start()).toBe(true);
    expect(await counterWindowDrift(db.pool)).toBe(0);
    // On time: nothing to do.
    expect(await moved(db.pool)).toEqual({ hours: 0, rebuilt: false });

    await windowAt(30);
    expect(await moved(db.pool)).toEqual({ hours: 30, rebuilt: true });
    expect(await start()).toBe(true);
    expect(await counterWindowDrift(db.pool)).toBe(0);
  });

  it('equal a recount after the ingest process is killed with SIGKILL mid-run and restarted', async () => {
    broker = await startTestBroker();
    const total = 30_000;
    const deviceIds = uniqueDeviceIds(100, 'countkill');
    await provisionFleetBulk(db.pool, deviceIds, 'Counter kill terminal');
    const env = {
      GANTRY_DATABASE_URL: db.url,
      GANTRY_MQTT_URL: broker.url,
      GANTRY_INGEST_CLIENT_ID: `gantry-ingest-counters-${deviceIds[0]}`,
      GANTRY_INGEST_SHARED_GROUP: '',
    };
    const first = await spawnService('ingest', { env });
    const publisher = await createPublisher({ mqttUrl: broker.url, window: 2000 });
    const publishing = publishMessages(
      publisher,
      fleetTraffic({ deviceIds, count: total, start: Date.now() - 2 * HOUR, stepMs: 20 }),
    );
    const deviceReadings = `SELECT count(*) FROM telemetry_readings r JOIN devices d ON d.id = r.device_id WHERE d.device_id LIKE 'countkill-%'`;
    await waitFor(
      () => countOf(db.pool, deviceReadings),
      (count) => count >= 8_000,
      120_000,
      'readings before the kill',
    );
    expect((await first.kill()).signal).toBe('SIGKILL');

    const second = await spawnService('ingest', { env });
    await publishing;
    await publisher.close();
    await waitFor(
      () => countOf(db.pool, deviceReadings),
      (count) => count >= total,
      240_000,
      'every reading',
    ).catch((error: Error) => {
      // What the restarted process said (it logs warnings and errors) tells a stall from a stop.
      const { exitCode, signalCode } = second.child;
      throw new Error(
        `${error.message}\nrestarted ingest: exit ${exitCode} ${signalCode}; stderr:\n${second.stderr()}`,
      );
    });
    await second.stop();

    await expectCountersEqualRecount(db);
    expect(
      await countOf(
        db.pool,
        `SELECT sum(${sumOf('readings')}) AS count FROM device_counts_hourly c JOIN devices d ON d.id = c.device_id
          WHERE d.device_id LIKE 'countkill-%'`,
      ),
    ).toBe(total);
  }, 400_000);
});
