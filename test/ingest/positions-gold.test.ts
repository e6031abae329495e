import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveDefinition } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { randomSource } from '@gantry/simulator';
import type { ParsedMessage } from '../../services/ingest/src/pipeline/steps.ts';
import { replayBronze } from '../../services/ingest/src/replay.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { testConfig } from '../support/api.ts';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { countOf, parseRaw, provisionFleetBulk, uniqueDeviceIds, writeParsed } from '../support/ingest.ts';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const RELATIONS = ['positions_1min', 'positions_15min'] as const;

/** A relation's rows next to its definition recomputed from silver now (the live definition). */
async function storedVersusLive(db: TestDatabase, relation: string) {
  const stored = await db.pool.query(`SELECT * FROM ${relation} ORDER BY asset_id, bucket`);
  const live = await db.pool.query(`SELECT * FROM (${liveDefinition(relation)}) d ORDER BY asset_id, bucket`);
  return { stored: stored.rows, live: live.rows };
}

async function expectGoldEqualsLive(db: TestDatabase, note: string): Promise<void> {
  for (const relation of RELATIONS) {
    const { stored, live } = await storedVersusLive(db, relation);
    expect(stored.length, `${relation} ${note}`).toBeGreaterThan(0);
    expect(stored, `${relation} ${note}`).toEqual(live);
  }
}

describe.each(availableStorageModes().filter((mode) => mode === 'postgres'))(
  'positions gold kept by ingest (%s)',
  (mode) => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase('positions_gold', mode);
    });
    afterAll(async () => db?.drop());

    const refresh = async (now = Date.now()) => {
      for (let guard = 0; guard < 100; guard += 1) {
        const result = await refreshGold(
          { pool: db.pool, logger: silentLogger(), storageMode: mode },
          { now: () => now, only: ['positions_1min'] },
        );
        if (result.failed.length > 0) throw new Error('positions refresh failed');
        if (!result.more && result.busy.length === 0) return;
      }
      throw new Error('positions refresh did not settle');
    };

    it('after random traffic from three writers at once — duplicates, late and out-of-order fixes, invalid fixes, two devices on one asset, a device moved — and a replay, positions_1min and positions_15min equal their definition recomputed from silver', async () => {
      const seed = Number(process.env.POSITIONS_TEST_SEED ?? Date.now() % 1_000_000);
      const next = randomSource(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
      const config = testConfig(db.url);
      const deviceIds = uniqueDeviceIds(5, 'pos');
      const fleet = await provisionFleetBulk(db.pool, deviceIds);
      // Devices 1 and 2 share an asset (their fixes of one instant tie in its buckets).
      await db.pool.query(`UPDATE devices SET asset_id = $1 WHERE id = $2`, [
        fleet.devices[0]!.assetId,
        fleet.devices[1]!.id,
      ]);
      // Built once before the traffic (a fresh database asks for a rebuild): from here on
      // only the differences ingest applies keep it.
      await refresh();

      const now = Date.now();
      const sent: Array<{ topic: string; payload: Buffer; receivedAt: number }> = [];
      /** A message of any device but `except`, new or a resend. */
      function message(except?: string): { topic: string; payload: Buffer; receivedAt: number } {
        const receivedAt = now - Math.floor(next() * 3 * HOUR);
        const others = except === undefined ? sent : sent.filter((m) => !m.topic.includes(`/${except}/`));
        if (next() < 0.15 && others.length > 0) return { ...pick(others), receivedAt }; // a resend: duplicate
        const deviceId = pick(deviceIds.filter((id) => id !== except));
        // Device times on whole 10 s steps, often hours late: fixes of one instant meet often.
        const late = next() < 0.3 ? next() * 2 * HOUR : next() * 2 * MINUTE;
        const ts = Math.floor((receivedAt - late) / 10_000) * 10_000;
        const fix = (at: number) => ({
          ts: at,
          lat: 51.9 + Math.floor(next() * 1000) / 10_000,
          lon: 4 + Math.floor(next() * 1000) / 10_000,
          hdop: next() < 0.2 ? 9 : 1, // hdop 9: a poor fix, not a position
          speedKmh: 5,
        });
        const batch = next() < 0.3;
        const payload = batch
          ? // Entries out of order within the message.
            Array.from({ length: 2 + Math.floor(next() * 4) }, () => ({
              type: 'gps',
              ...fix(ts - Math.floor(next() * 12) * 10_000),
            }))
          : fix(ts);
        const sentMessage = {
          topic: `gantry/v1/devices/${deviceId}/${batch ? 'batch' : 'gps'}`,
          payload: Buffer.from(JSON.stringify(payload)),
          receivedAt,
        };
        sent.push(sentMessage);
        return sentMessage;
      }
      const parse = (raw: { topic: string; payload: Buffer; receivedAt: number }) => parseRaw(config, raw);
      const write = (messages: ParsedMessage[], method: 'unnest' | 'copy') => writeParsed(db.pool, messages, method);

      for (let round = 0; round < 8; round += 1) {
        await Promise.all(
          [0, 1, 2].map((writer) =>
            write(
              Array.from({ length: 120 }, () => parse(message())),
              writer % 2 === 0 ? 'unnest' : 'copy',
            ),
          ),
        );
        // A device moves to another asset: its later fixes count for the new one.
        if (round === 3)
          await db.pool.query(`UPDATE devices SET asset_id = $1 WHERE id = $2`, [
            fleet.devices[3]!.assetId,
            fleet.devices[2]!.id,
          ]);
      }
      // Live traffic needs no refresh: gold equals the definition as the batches committed.
      await expectGoldEqualsLive(db, `after live traffic, seed ${seed}`);
      expect(await countOf(db.pool, `SELECT count(*) FROM gold_invalidations WHERE relation = 'positions_1min'`)).toBe(
        0,
      );

      // What the traffic held: duplicates dropped, poor fixes kept out, a shared asset with
      // fixes of one instant from both of its devices, and fixes of a moved device under both assets.
      expect(await countOf(db.pool, `SELECT count(*) FROM telemetry_readings WHERE NOT gps_valid`)).toBeGreaterThan(0);
      expect(
        await countOf(
          db.pool,
          `SELECT count(*) FROM (SELECT asset_id, ts FROM telemetry_readings WHERE gps_valid
             GROUP BY asset_id, ts HAVING count(DISTINCT device_id) > 1) tie`,
        ),
      ).toBeGreaterThan(0);
      expect(
        await countOf(
          db.pool,
          `SELECT count(DISTINCT asset_id) FROM telemetry_readings WHERE device_id = '${fleet.devices[2]!.id}'`,
        ),
      ).toBe(2);
      expect(await countOf(db.pool, `SELECT count(*) FROM device_messages WHERE status = 'duplicate'`)).toBeGreaterThan(
        0,
      );

      // A valid fix stored, then a poor fix of the same device and instant received earlier
      // (a duplicate): silver and gold keep the valid one, and a replay will store the poor one.
      // Its minute is after every other fix of the asset, so only this fix can get it refreshed.
      const instant = Math.ceil((now + 2 * MINUTE) / MINUTE) * MINUTE + 5_000;
      const sharedTopic = `gantry/v1/devices/${fleet.devices[0]!.deviceId}/gps`;
      const fixOf = (hdop: number, receivedAt: number) =>
        parse({
          topic: sharedTopic,
          payload: Buffer.from(JSON.stringify({ ts: instant, lat: 52, lon: 4.5, hdop, speedKmh: 5 })),
          receivedAt,
        });
      await write([fixOf(1, instant + 20_000)], 'unnest');
      await write([fixOf(9, instant + 10_000)], 'unnest');
      await expectGoldEqualsLive(db, `after a valid fix and a poor copy, seed ${seed}`);

      // Readings silver lost (gold still counts them) stored again by a replay, while traffic
      // of the other devices goes on. (Received again as live traffic, they would count twice:
      // differences cannot see what silver lost, docs/derivation.md.)
      await db.pool.query(`DELETE FROM telemetry_readings WHERE device_id = $1 AND ts > $2`, [
        fleet.devices[0]!.id,
        new Date(now - HOUR),
      ]);
      const range = { from: new Date(now - 4 * HOUR), to: new Date(now + HOUR) };
      const [replayed] = await Promise.all([
        replayBronze({ pool: db.pool, config }, { ...range, all: true, chunkSize: 97 }),
        write(
          Array.from({ length: 120 }, () => parse(message(fleet.devices[0]!.deviceId))),
          'unnest',
        ),
      ]);
      expect(replayed.messages).toBeGreaterThan(0);
      expect(
        await countOf(
          db.pool,
          `SELECT count(*) FROM telemetry_readings WHERE device_id = $1 AND ts = $2 AND NOT gps_valid`,
          [fleet.devices[0]!.id, new Date(instant)],
        ),
      ).toBe(1);
      expect(
        await countOf(db.pool, `SELECT count(*) FROM gold_invalidations WHERE relation = 'positions_1min'`),
      ).toBeGreaterThan(0);
      await refresh();
      await expectGoldEqualsLive(db, `after a replay and its refresh, seed ${seed}`);

      // A rebuild from silver gives what the differences kept.
      const kept = await Promise.all(
        RELATIONS.map((r) => db.pool.query(`SELECT * FROM ${r} ORDER BY asset_id, bucket`)),
      );
      await db.pool.query(`UPDATE gold_coverage SET status = 'rebuild' WHERE relation = 'positions_1min'`);
      await refresh();
      const rebuilt = await Promise.all(
        RELATIONS.map((r) => db.pool.query(`SELECT * FROM ${r} ORDER BY asset_id, bucket`)),
      );
      expect(rebuilt.map((result) => result.rows)).toEqual(kept.map((result) => result.rows));
    }, 120_000);
  },
);
