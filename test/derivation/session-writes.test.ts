import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MachineScript, destination, type LatLon } from '@gantry/simulator';
import { availableStorageModes } from '../support/database.ts';
import {
  createDerivationFixture,
  deriveAll,
  markDirty,
  readOutputs,
  storeReadings,
  type DerivationFixture,
} from './helpers.ts';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const YARD: LatLon = { lat: 51.9496, lon: 4.1453 };

/** Every row written to the session tables, in order, by a trigger of the test database. */
const LOG_SESSION_WRITES = `
  CREATE TABLE session_writes (n bigserial PRIMARY KEY, relation text NOT NULL, op text NOT NULL, id uuid NOT NULL);
  CREATE FUNCTION log_session_write() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO session_writes (relation, op, id)
    VALUES (TG_TABLE_NAME, TG_OP, CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
    RETURN NULL;
  END $$;
  CREATE TRIGGER log_usage_session_writes AFTER INSERT OR UPDATE OR DELETE ON usage_sessions
    FOR EACH ROW EXECUTE FUNCTION log_session_write();
  CREATE TRIGGER log_identifier_session_writes AFTER INSERT OR UPDATE OR DELETE ON identifier_sessions
    FOR EACH ROW EXECUTE FUNCTION log_session_write();`;

describe.each(availableStorageModes())('session writes (%s)', (mode) => {
  let fixture: DerivationFixture;
  beforeAll(async () => {
    fixture = await createDerivationFixture('session_writes', mode, 2);
    await fixture.pool.query(LOG_SESSION_WRITES);
  });
  afterAll(async () => fixture?.drop());

  const writes = async (relation: string) =>
    (
      await fixture.pool.query<{ op: string; id: string }>(
        `SELECT op, id FROM session_writes WHERE relation = $1 ORDER BY n`,
        [relation],
      )
    ).rows.map((row) => [row.op, row.id]);

  it('an open session extended by several derivations keeps its row: updated in place, never deleted, untouched when nothing changed', async () => {
    const device = fixture.devices[0]!;
    const start = Math.floor((Date.now() - 3 * HOUR) / HOUR) * HOUR;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    let here = YARD;
    const work = () => {
      here = destination(here, 250, 70);
      script.drive(here, 12).idle(40);
    };
    const derive = async () => {
      await storeReadings(fixture, script.messages());
      await deriveAll(fixture, script.now + MINUTE);
      return readOutputs(fixture, device);
    };

    script.ignitionOn().login('OP-3');
    work();
    let outputs = await derive();
    expect(outputs.usageSessions.map((s) => s.is_open)).toEqual([true]);
    expect(outputs.identifierSessions.map((s) => s.is_open)).toEqual([true]);
    const usageId = outputs.usageSessions[0]!.id as string;
    const identifierId = outputs.identifierSessions[0]!.id as string;
    const ends = [(outputs.usageSessions[0]!.end_ts as Date).getTime()];
    const events = [outputs.identifierSessions[0]!.event_count as number];

    const rounds = 5;
    for (let round = 0; round < rounds; round += 1) {
      work();
      outputs = await derive();
      expect(outputs.usageSessions.map((s) => [s.id, s.is_open])).toEqual([[usageId, true]]);
      expect(outputs.identifierSessions.map((s) => [s.id, s.is_open])).toEqual([[identifierId, true]]);
      ends.push((outputs.usageSessions[0]!.end_ts as Date).getTime());
      events.push(outputs.identifierSessions[0]!.event_count as number);
    }
    // The session went on in every round.
    for (let round = 1; round <= rounds; round += 1) {
      expect(ends[round]!).toBeGreaterThan(ends[round - 1]!);
      expect(events[round]!).toBeGreaterThan(events[round - 1]!);
    }
    const inserted = (id: string) => [['INSERT', id]];
    const updated = (id: string) => Array.from({ length: rounds }, () => ['UPDATE', id]);
    expect(await writes('usage_sessions')).toEqual([...inserted(usageId), ...updated(usageId)]);
    expect(await writes('identifier_sessions')).toEqual([...inserted(identifierId), ...updated(identifierId)]);

    // Marked again with nothing new (duplicates, as ingest marks them): from the carry, then
    // from scratch (before the first reading). The same sessions come out; no row is written.
    const stored = await readOutputs(fixture, device);
    await markDirty(fixture, device, script.now);
    await deriveAll(fixture, script.now + MINUTE);
    await markDirty(fixture, device, start - MINUTE);
    await deriveAll(fixture, script.now + MINUTE);
    expect(await readOutputs(fixture, device)).toEqual(stored);
    expect(await writes('usage_sessions')).toHaveLength(1 + rounds);
    expect(await writes('identifier_sessions')).toHaveLength(1 + rounds);

    // The operator logs out and the machine is switched off: both sessions close in place.
    script.logout().idle(117).ignitionOff();
    outputs = await derive();
    expect(outputs.usageSessions.map((s) => [s.id, s.is_open, s.end_reason])).toEqual([
      [usageId, false, 'ignition_off'],
    ]);
    expect(outputs.identifierSessions.map((s) => [s.id, s.is_open, s.end_reason])).toEqual([
      [identifierId, false, 'logout'],
    ]);
    expect((await writes('usage_sessions')).filter(([op]) => op !== 'UPDATE')).toEqual(inserted(usageId));
    expect((await writes('identifier_sessions')).filter(([op]) => op !== 'UPDATE')).toEqual(inserted(identifierId));
  });

  it('a session that is no longer derived is deleted, and only that one', async () => {
    // Late readings before the start of an open session, with the ignition on: the session
    // now starts earlier, under another id: the one stored before goes. The closed session
    // before it comes out of the re-derivation the same and is not written.
    const device = fixture.devices[1]!;
    const scriptAt = (start: number) =>
      new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    const early = scriptAt(Math.floor((Date.now() - 5 * HOUR) / HOUR) * HOUR);
    early
      .ignitionOn()
      .drive(destination(YARD, 300, 30), 12)
      .idle(117)
      .ignitionOff();
    const lateStart = Math.floor((Date.now() - 4 * HOUR) / HOUR) * HOUR;
    const late = scriptAt(lateStart);
    late
      .ignitionOn()
      .drive(destination(YARD, 200, 10), 12)
      .idle(30);
    const current = scriptAt(late.now + 5_000);
    current
      .ignitionOn()
      .drive(destination(YARD, 300, 200), 12)
      .idle(30);

    await storeReadings(fixture, [...early.messages(), ...current.messages()]);
    await deriveAll(fixture, current.now + MINUTE);
    const before = await readOutputs(fixture, device);
    expect(before.usageSessions.map((s) => [s.is_open, s.end_reason])).toEqual([
      [false, 'ignition_off'],
      [true, null],
    ]);
    const replacedId = before.usageSessions[1]!.id as string;
    const { rows: marks } = await fixture.pool.query<{ n: string }>(`SELECT max(n)::text AS n FROM session_writes`);

    await storeReadings(fixture, late.messages());
    await deriveAll(fixture, current.now + MINUTE);
    const after = await readOutputs(fixture, device);
    expect(after.usageSessions.map((s) => s.is_open)).toEqual([false, true]);
    expect(after.usageSessions[0]).toEqual(before.usageSessions[0]);
    expect((after.usageSessions[1]!.start_ts as Date).getTime()).toBe(lateStart);
    const openId = after.usageSessions[1]!.id as string;
    expect(openId).not.toBe(replacedId);
    const { rows } = await fixture.pool.query<{ op: string; id: string }>(
      `SELECT op, id FROM session_writes WHERE relation = 'usage_sessions' AND n > $1 ORDER BY op`,
      [marks[0]!.n],
    );
    expect(rows.map((row) => [row.op, row.id])).toEqual([
      ['DELETE', replacedId],
      ['INSERT', openId],
    ]);
  });
});
