import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MachineScript, destination, type LatLon } from '@gantry/simulator';
import { availableStorageModes } from '../support/database.ts';
import { createDerivationFixture, deriveAll, readOutputs, storeReadings, type DerivationFixture } from './helpers.ts';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const YARD: LatLon = { lat: 51.9496, lon: 4.1453 };

/** Every row written to telemetry_segments, in order, by a trigger of the test database. */
const LOG_SEGMENT_WRITES = `
  CREATE TABLE segment_writes (n bigserial PRIMARY KEY, op text NOT NULL, start_ts timestamptz NOT NULL);
  CREATE FUNCTION log_segment_write() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO segment_writes (op, start_ts) VALUES (TG_OP, CASE WHEN TG_OP = 'DELETE' THEN OLD.start_ts ELSE NEW.start_ts END);
    RETURN NULL;
  END $$;
  CREATE TRIGGER log_segment_writes AFTER INSERT OR UPDATE OR DELETE ON telemetry_segments
    FOR EACH ROW EXECUTE FUNCTION log_segment_write();`;

describe.each(availableStorageModes())('segment writes (%s)', (mode) => {
  let fixture: DerivationFixture;
  beforeAll(async () => {
    fixture = await createDerivationFixture('segment_writes', mode);
    await fixture.pool.query(LOG_SEGMENT_WRITES);
  });
  afterAll(async () => fixture?.drop());

  it('the open segment extended by several derivations keeps its row: updated in place, never deleted and re-inserted', async () => {
    const device = fixture.devices[0]!;
    // Inside one hour (segments are cut at hour boundaries): a machine idling with the ignition on.
    const start = Math.floor((Date.now() - 3 * HOUR) / HOUR) * HOUR + 5 * MINUTE;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    const derive = async () => {
      await storeReadings(fixture, script.messages());
      await deriveAll(fixture, script.now + MINUTE);
      return (await readOutputs(fixture, device)).segments;
    };

    script.ignitionOn().idle(120);
    const first = await derive();
    const open = first[first.length - 1]!;
    const openStart = (open.start_ts as Date).getTime();
    const { rows: before } = await fixture.pool.query<{ n: string }>('SELECT max(n) AS n FROM segment_writes');

    const rounds = 4;
    const ends = [(open.end_ts as Date).getTime()];
    for (let round = 0; round < rounds; round += 1) {
      script.idle(120);
      const segments = await derive();
      expect(segments.map((s) => (s.start_ts as Date).getTime())).toEqual(
        first.map((s) => (s.start_ts as Date).getTime()),
      );
      ends.push((segments[segments.length - 1]!.end_ts as Date).getTime());
    }
    // The segment went on in every round, and each round updated its row.
    for (let round = 1; round <= rounds; round += 1) expect(ends[round]!).toBeGreaterThan(ends[round - 1]!);
    const { rows: writes } = await fixture.pool.query<{ op: string; start_ts: Date }>(
      'SELECT op, start_ts FROM segment_writes WHERE n > $1 ORDER BY n',
      [before[0]!.n],
    );
    expect(writes.map((w) => [w.op, w.start_ts.getTime()])).toEqual(
      Array.from({ length: rounds }, () => ['UPDATE', openStart]),
    );

    // Moving starts a new segment: the open one is closed in place, the new one inserted.
    script.drive(destination(YARD, 300, 45), 12);
    const moved = await derive();
    expect(moved.length).toBeGreaterThan(first.length);
    const { rows: after } = await fixture.pool.query<{ op: string }>(
      `SELECT DISTINCT op FROM segment_writes WHERE n > $1 ORDER BY op`,
      [before[0]!.n],
    );
    expect(after.map((w) => w.op)).toEqual(['INSERT', 'UPDATE']);
  });
});
