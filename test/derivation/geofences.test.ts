import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutbox } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { MachineScript, destination, type LatLon } from '@gantry/simulator';
import { availableStorageModes } from '../support/database.ts';
import { createDerivationFixture, deriveAll, markDirty, storeReadings, type DerivationFixture } from './helpers.ts';

const MINUTE = 60_000;
const YARD: LatLon = { lat: 57.7005, lon: 11.9402 };

/** A closed square ring of half-size `half` metres around a point, as GeoJSON [lon, lat]. */
function square(center: LatLon, half: number): Array<[number, number]> {
  const north = destination(center, half, 0).lat;
  const south = destination(center, half, 180).lat;
  const east = destination(center, half, 90).lon;
  const west = destination(center, half, 270).lon;
  return [
    [west, south],
    [east, south],
    [east, north],
    [west, north],
    [west, south],
  ];
}

describe.each(availableStorageModes())('geofence alerts (%s)', (mode) => {
  let fixture: DerivationFixture;
  let forbiddenId: string;
  let allowedId: string;
  const east = (metres: number) => destination(YARD, metres, 90);

  beforeAll(async () => {
    fixture = await createDerivationFixture('geofence', mode, 3);
    const deps = { pool: fixture.pool, outbox: createOutbox({ maxAttempts: 3 }) };
    // Two blocks in one MultiPolygon; the drive east crosses the second, 300 m out.
    const forbidden = await provisioning.createGeofence(deps, fixture.tenantId, {
      name: 'Quay crane lane',
      type: 'forbidden',
      geometry: {
        type: 'MultiPolygon',
        coordinates: [[square(destination(YARD, 400, 0), 40)], [square(east(300), 40)]],
      },
    });
    const allowed = await provisioning.createGeofence(deps, fixture.tenantId, {
      name: 'Terminal',
      type: 'allowed',
      geometry: { type: 'Polygon', coordinates: [square(YARD, 1000)] },
    });
    forbiddenId = forbidden.id;
    allowedId = allowed.id;
  });
  afterAll(async () => fixture?.drop());

  const alerts = async (assetId: string) =>
    (
      await fixture.pool.query(
        `SELECT a.alert_type, a.status, a.is_active, a.created_at, a.resolved_at, g.name
           FROM geofence_alerts a JOIN geofences g ON g.id = a.geofence_id WHERE a.asset_id = $1 ORDER BY a.created_at`,
        [assetId],
      )
    ).rows;
  const events = async () =>
    (
      await fixture.pool.query(
        // In the order of the changes they report (ISO texts sort as time): events enqueued
        // in the same millisecond share created_at, and their ids are random.
        `SELECT event_type, entity_id, data FROM webhook_events WHERE entity_type = 'geofence_alert'
          ORDER BY coalesce(data->>'resolvedAt', data->>'createdAt'), created_at, id`,
      )
    ).rows;

  it('entering a forbidden zone opens an alert, leaving it resolves it, leaving the allowed zone opens another; each change is an event', async () => {
    const device = fixture.devices[0]!;
    const start = Date.now() - 12 * MINUTE;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    script
      .ignitionOn()
      .drive(east(600), 15)
      .drive(destination(east(600), 1500, 0), 20)
      .idle(30)
      .ignitionOff();
    await storeReadings(fixture, script.messages());
    await deriveAll(fixture);

    const rows = await alerts(device.assetId);
    expect(rows.map((r) => [r.name, r.alert_type, r.status, r.is_active])).toEqual([
      ['Quay crane lane', 'forbidden_enter', 'open', false],
      ['Terminal', 'allowed_exit', 'open', true],
    ]);
    // The crane lane spans 260–340 m east; at 15 km/h a fix lands every 20.8 m.
    const speed = 15 / 3.6;
    const entered = (rows[0]!.created_at as Date).getTime() - start;
    const left = (rows[0]!.resolved_at as Date).getTime() - start;
    expect(entered).toBeGreaterThanOrEqual((260 / speed) * 1000);
    expect(entered).toBeLessThan(((260 + 21) / speed) * 1000);
    expect(left).toBeGreaterThanOrEqual((340 / speed) * 1000);
    expect(left).toBeLessThan(((340 + 21) / speed) * 1000);

    const sent = await events();
    expect(sent.map((e) => [e.event_type, e.data.alertType, e.data.geofenceName, e.data.isActive])).toEqual([
      ['telemetry.geofence_alert.opened', 'forbidden_enter', 'Quay crane lane', true],
      ['telemetry.geofence_alert.resolved', 'forbidden_enter', 'Quay crane lane', false],
      ['telemetry.geofence_alert.opened', 'allowed_exit', 'Terminal', true],
    ]);
    expect(sent[0]!.data.asset).toMatchObject({ id: device.assetId, customerName: 'Customer A' });
    expect(sent[1]!.data.resolvedAt).toBe((rows[0]!.resolved_at as Date).toISOString());

    const memberships = await fixture.pool.query(
      `SELECT geofence_id, inside FROM geofence_memberships WHERE asset_id = $1`,
      [device.assetId],
    );
    expect(Object.fromEntries(memberships.rows.map((m) => [m.geofence_id, m.inside]))).toEqual({
      [forbiddenId]: false,
      [allowedId]: false,
    });
  });

  it('deriving the same readings again opens and sends nothing more', async () => {
    const device = fixture.devices[0]!;
    const before = await events();
    await markDirty(fixture, device, Date.now() - 13 * MINUTE);
    await deriveAll(fixture);
    expect(await events()).toEqual(before);
    expect(await alerts(device.assetId)).toHaveLength(2);
  });

  it('history older than 15 minutes moves memberships but raises no alert', async () => {
    const device = fixture.devices[1]!;
    const start = Date.now() - 3 * 60 * MINUTE;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    script.ignitionOn().drive(east(300), 15).idle(60).ignitionOff();
    const before = await events();
    await storeReadings(fixture, script.messages());
    await deriveAll(fixture);
    expect(await alerts(device.assetId)).toEqual([]);
    expect(await events()).toEqual(before);
    const memberships = await fixture.pool.query(
      `SELECT geofence_id, inside FROM geofence_memberships WHERE asset_id = $1`,
      [device.assetId],
    );
    expect(Object.fromEntries(memberships.rows.map((m) => [m.geofence_id, m.inside]))).toEqual({
      [forbiddenId]: true,
      [allowedId]: true,
    });
  });

  it('late data that reaches an entry earlier than first seen moves the membership back to the true entry', async () => {
    const device = fixture.devices[2]!;
    const start = Date.now() - 3 * 60 * MINUTE;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    script.ignitionOn().drive(east(320), 15).idle(60).ignitionOff();
    const messages = script.messages();
    // The crane lane spans 260–340 m east. The readings from 300 m on arrive first (a
    // store-and-forward upload overtaking the live stream), the earlier ones after them.
    const speed = 15 / 3.6;
    const firstFix = Math.min(...messages.filter((message) => message.type === 'gps').map((message) => message.ts));
    const cut = firstFix + (300 / speed) * 1000;
    const membership = async () =>
      (
        await fixture.pool.query(
          `SELECT inside, changed_at FROM geofence_memberships WHERE asset_id = $1 AND geofence_id = $2`,
          [device.assetId, forbiddenId],
        )
      ).rows[0];
    await storeReadings(
      fixture,
      messages.filter((message) => message.ts >= cut),
    );
    await deriveAll(fixture);
    const firstSeen = await membership();
    expect(firstSeen.inside).toBe(true);
    expect((firstSeen.changed_at as Date).getTime()).toBeGreaterThanOrEqual(cut);

    await storeReadings(
      fixture,
      messages.filter((message) => message.ts < cut),
    );
    await deriveAll(fixture);
    const corrected = await membership();
    expect(corrected.inside).toBe(true);
    const entered = (corrected.changed_at as Date).getTime() - firstFix;
    expect(entered).toBeGreaterThanOrEqual((260 / speed) * 1000);
    expect(entered).toBeLessThan(((260 + 21) / speed) * 1000);
    expect(await alerts(device.assetId)).toEqual([]);
  });
});
