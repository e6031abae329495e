import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisioning } from '@gantry/api';
import { counterWindowDrift } from '@gantry/db';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { provisioner } from '../support/fixtures.ts';
import {
  createFleet,
  insertDeviceState,
  insertMessages,
  insertReadings,
  minutesAgo,
  type Fleet,
  type MessageInput,
} from './fixtures.ts';

const HOUR = 3_600_000;

function times(count: number, from: number, type: string, extra: Partial<MessageInput> = {}): MessageInput[] {
  return Array.from({ length: count }, (_, index) => ({ type, receivedAt: minutesAgo(from - index), ...extra }));
}

describe.each(availableStorageModes())('GET /telemetry/data-quality (%s mode)', (mode) => {
  let db: TestDatabase;
  let api: TestApi;
  let fleet: Fleet;
  /** Receive times of the messages stored per asset, to work out what a range holds. */
  const received: Record<string, number[]> = {};

  async function sendMessages(name: string, messages: MessageInput[]): Promise<void> {
    received[name] = [...(received[name] ?? []), ...messages.map((message) => message.receivedAt.getTime())];
    await insertMessages(db.pool, fleet.tenantId, fleet.byName[name]!, messages);
  }

  beforeAll(async () => {
    db = await createTestDatabase(`telemetry_quality_${mode}`, mode);
    api = await startTestApi(db.pool, db.url);
    fleet = await createFleet(db.pool, [
      ['Poor GPS', 'Acme'],
      ['Erring', 'Acme'],
      ['Late', 'Globex'],
      ['Quiet', 'Globex'],
      ['Never', 'Acme'],
      ['Off', 'Acme'],
      ['Fine', 'Acme'],
    ]);
    await provisioning.createAsset(provisioner(db.pool), fleet.tenantId, {
      name: 'No device',
      identifier: 'NODEV',
      customerName: 'Acme',
    });
    const t = fleet.tenantId;
    const { byName } = fleet;
    await provisioning.updateDevice(provisioner(db.pool), t, byName.Off!.deviceUuid, { enabled: false });

    for (const name of ['Poor GPS', 'Erring', 'Late', 'Fine', 'Off'])
      await insertDeviceState(db.pool, t, byName[name]!, { lastSeenAt: minutesAgo(2) });
    await insertDeviceState(db.pool, t, byName.Quiet!, { lastSeenAt: minutesAgo(40) });

    // Poor GPS: 20 fixes, 15 valid (75 %).
    await sendMessages('Poor GPS', times(20, 100, 'gps'));
    await insertReadings(
      db.pool,
      t,
      byName['Poor GPS']!,
      Array.from({ length: 20 }, (_, index) => ({ type: 'gps', ts: minutesAgo(100 - index), gpsValid: index >= 5 })),
    );
    // Erring: 11 messages, 2 rejected and one batch stored in part (3 with errors, 27.27 %), one with a long payload.
    await sendMessages('Erring', [
      ...times(4, 90, 'adcin'),
      ...times(4, 80, 'heartbeat'),
      {
        type: 'gps',
        receivedAt: minutesAgo(30),
        status: 'rejected',
        error: 'invalid_json',
        errorDetail: 'Unexpected end of JSON input',
        payload: '{"lat": 95',
      },
      {
        type: 'gps',
        receivedAt: minutesAgo(20),
        status: 'rejected',
        error: 'payload_too_large',
        payload: `{"pad":"${'x'.repeat(1000)}"}`,
      },
      {
        type: 'batch',
        receivedAt: minutesAgo(10),
        status: 'partial',
        error: 'invalid_timestamp',
        errorDetail: '1 of 2 entries rejected; entry 1: ts: not a date',
        payload: '[{"type":"heartbeat","ts":1},{"type":"gps","ts":"bad"}]',
      },
    ]);
    await insertReadings(db.pool, t, byName.Erring!, [
      ...Array.from({ length: 4 }, (_, index) => ({ type: 'adcin', ts: minutesAgo(90 - index) })),
      ...Array.from({ length: 4 }, (_, index) => ({ type: 'heartbeat', ts: minutesAgo(80 - index) })),
    ]);
    // Late: every message received 10 minutes after its device time.
    await sendMessages(
      'Late',
      Array.from({ length: 10 }, (_, index) => ({
        type: 'imu',
        receivedAt: minutesAgo(70 - index),
        deviceTs: minutesAgo(80 - index),
      })),
    );
    await insertReadings(
      db.pool,
      t,
      byName.Late!,
      Array.from({ length: 10 }, (_, index) => ({ type: 'imu', ts: minutesAgo(80 - index) })),
    );
    // Quiet: last heard 40 minutes ago.
    await sendMessages('Quiet', times(5, 45, 'heartbeat'));
    // Fine: 12 valid fixes and 4 hourmeter readings.
    await sendMessages('Fine', [...times(12, 60, 'gps'), ...times(4, 40, 'hourmeter')]);
    await insertReadings(db.pool, t, byName.Fine!, [
      ...Array.from({ length: 12 }, (_, index) => ({ type: 'gps', ts: minutesAgo(60 - index) })),
      ...Array.from({ length: 4 }, (_, index) => ({ type: 'hourmeter', ts: minutesAgo(40 - index) })),
    ]);
    // Off: disabled, still sending.
    await sendMessages('Off', times(3, 30, 'gps'));
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  async function get(path: string, key = fleet.tenantKey) {
    const response = await api.external(path, key);
    const body = await json(response);
    expect(response.status, `${path}: ${JSON.stringify(body)}`).toBe(200);
    return body;
  }

  const entry = (body: any, name: string) => body.assets.find((item: any) => item.name === name);

  it('gives each device the first status that applies, with its counts and notes', async () => {
    const before = Date.now();
    const body = await get('/telemetry/data-quality');
    const after = Date.now();
    expect(body.telemetryEnabled).toBe(true);
    expect(body.capabilityState).toBe('configured');
    // The default last 24 hours, widened to the whole hours the counters hold.
    expect(Date.parse(body.from) % HOUR).toBe(0);
    expect(Date.parse(body.to) % HOUR).toBe(0);
    expect(Date.parse(body.from)).toBeLessThanOrEqual(after - 24 * HOUR);
    expect(Date.parse(body.from)).toBeGreaterThan(before - 25 * HOUR);
    expect(Date.parse(body.to)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(body.to)).toBeLessThanOrEqual(after + HOUR);
    expect(Math.abs(Date.parse(body.generatedAt) - Date.now())).toBeLessThan(60_000);
    expect(Object.fromEntries(body.assets.map((item: any) => [item.name, item.status]))).toEqual({
      Erring: 'errors',
      Fine: 'ok',
      Late: 'delayed',
      Never: 'offline',
      Off: 'disabled',
      'Poor GPS': 'poor_gps',
      Quiet: 'silent',
    });
    expect(entry(body, 'Poor GPS')).toMatchObject({
      assetId: fleet.byName['Poor GPS']!.id,
      identifier: 'POOR-GPS',
      displayCode: 'POOR-GPS',
      assetTypeName: 'Straddle carrier',
      deviceId: fleet.byName['Poor GPS']!.deviceId,
      statusLabel: 'Poor GPS',
      enabled: true,
      gpsEvents: 20,
      validGpsEvents: 15,
      gpsOkPercent: 75,
      messageCount: 20,
      parsedMessages: 20,
      errorMessages: 0,
      errorRate: 0,
      silverEvents: 20,
    });
    expect(entry(body, 'Poor GPS').notes.join(' ')).toContain('75 % of 20 GPS fixes valid');
    expect(entry(body, 'Erring')).toMatchObject({
      messageCount: 11,
      errorMessages: 3,
      parsedMessages: 9,
      errorRate: 27.27,
      adcinEvents: 4,
      heartbeatEvents: 4,
      gpsEvents: 0,
      gpsOkPercent: null,
      statusLabel: 'High error rate',
    });
    expect(entry(body, 'Late')).toMatchObject({ imuEvents: 10, messageCount: 10, statusLabel: 'Delayed data' });
    expect(entry(body, 'Quiet')).toMatchObject({ messageCount: 5, lastSeenAt: expect.any(String) });
    expect(entry(body, 'Never')).toMatchObject({
      messageCount: 0,
      lastSeenAt: null,
      notes: ['no message received yet'],
    });
    expect(entry(body, 'Fine')).toMatchObject({ gpsOkPercent: 100, hourmeterEvents: 4, notes: [] });
  });

  it('summarises message types, recent errors with truncated payloads, and the fleet', async () => {
    const body = await get('/telemetry/data-quality');
    expect(body.messageTypes).toEqual([
      { messageType: 'adcin', deviceCount: 1, errorMessages: 0, messageCount: 4, errorRate: 0 },
      { messageType: 'batch', deviceCount: 1, errorMessages: 1, messageCount: 1, errorRate: 100 },
      { messageType: 'gps', deviceCount: 4, errorMessages: 2, messageCount: 37, errorRate: 5.41 },
      { messageType: 'heartbeat', deviceCount: 2, errorMessages: 0, messageCount: 9, errorRate: 0 },
      { messageType: 'hourmeter', deviceCount: 1, errorMessages: 0, messageCount: 4, errorRate: 0 },
      { messageType: 'imu', deviceCount: 1, errorMessages: 0, messageCount: 10, errorRate: 0 },
    ]);
    expect(body.recentErrors).toHaveLength(3);
    // The batch stored in part is an error too, with the reason of its first bad entry.
    expect(body.recentErrors.shift()).toMatchObject({
      ingestError: 'invalid_timestamp: 1 of 2 entries rejected; entry 1: ts: not a date',
      messageType: 'batch',
    });
    expect(body.recentErrors[0]).toMatchObject({
      deviceId: fleet.byName.Erring!.deviceId,
      ingestError: 'payload_too_large',
      messageType: 'gps',
      subject: `gantry/v1/devices/${fleet.byName.Erring!.deviceId}/gps`,
    });
    expect(body.recentErrors[0].payloadSample).toHaveLength(201);
    expect(body.recentErrors[0].payloadSample.endsWith('…')).toBe(true);
    expect(body.recentErrors[1]).toMatchObject({
      ingestError: 'invalid_json: Unexpected end of JSON input',
      payloadSample: '{"lat": 95',
    });
    expect(body.summary).toMatchObject({
      assetsWithData: 6,
      delayedAssets: 1,
      errorAssets: 1,
      errorMessages: 3,
      gpsEvents: 32,
      validGpsEvents: 27,
      messageCount: 65,
      parsedMessages: 63,
      silverEvents: 54,
      offlineAssets: 1,
      onlineAssets: 4,
      poorGpsAssets: 1,
      silentAssets: 1,
      recentErrorCount: 3,
      telemetryAssets: 7,
      totalAssets: 8,
      coveragePercent: 85.71,
      errorRate: 4.62,
      gpsOkPercent: 84.38,
      // ok 100, errors 50, delayed 80, poor_gps 70, silent 30, offline 0 → 330 / 6
      qualityScore: 55,
    });
  });

  it('shows a customer key only its devices, and filters by asset', async () => {
    const globex = await get('/telemetry/data-quality', fleet.globexKey);
    expect(globex.assets.map((item: any) => item.name)).toEqual(['Late', 'Quiet']);
    expect(globex.messageTypes.map((item: any) => item.messageType)).toEqual(['heartbeat', 'imu']);
    expect(globex.recentErrors).toEqual([]);
    expect(globex.summary).toMatchObject({ telemetryAssets: 2, totalAssets: 2, messageCount: 15 });
    const one = await get(`/telemetry/data-quality?assetId=${fleet.byName.Erring!.id}`);
    expect(one.assets.map((item: any) => item.name)).toEqual(['Erring']);
    expect(one.recentErrors).toHaveLength(3);
    expect(
      (await api.external(`/telemetry/data-quality?assetId=${fleet.byName.Erring!.id}`, fleet.globexKey)).status,
    ).toBe(404);
  });

  describe('status, q, limit and offset', () => {
    const names = (body: any) => body.assets.map((item: any) => item.name);

    it('answers as before without them: every entry, no paging', async () => {
      const body = await get('/telemetry/data-quality');
      expect(names(body)).toEqual(['Erring', 'Fine', 'Late', 'Never', 'Off', 'Poor GPS', 'Quiet']);
      expect(body).not.toHaveProperty('paging');
    });

    it('lists only the statuses asked for, one or several, with the summary and message types of the whole scope', async () => {
      const whole = await get('/telemetry/data-quality');
      const offline = await get('/telemetry/data-quality?status=offline');
      expect(names(offline)).toEqual(['Never']);
      expect(offline).not.toHaveProperty('paging');
      const attention = await get('/telemetry/data-quality?status=offline,silent,errors');
      expect(names(attention)).toEqual(['Erring', 'Never', 'Quiet']);
      for (const body of [offline, attention]) {
        const { analyticsUpdatedAt: _a, ...summary } = body.summary;
        const { analyticsUpdatedAt: _b, ...wholeSummary } = whole.summary;
        expect(summary).toEqual(wholeSummary);
        expect(body.messageTypes).toEqual(whole.messageTypes);
        expect(body.recentErrors).toEqual(whole.recentErrors);
      }
      expect(names(await get('/telemetry/data-quality?status=ok'))).toEqual(['Fine']);
    });

    it('finds entries by a case-insensitive part of the name, identifier or device id', async () => {
      expect(names(await get('/telemetry/data-quality?q=gps'))).toEqual(['Poor GPS']);
      expect(names(await get('/telemetry/data-quality?q=ERR'))).toEqual(['Erring']);
      const deviceId = fleet.byName.Quiet!.deviceId;
      expect(names(await get(`/telemetry/data-quality?q=${encodeURIComponent(deviceId.toUpperCase())}`))).toEqual([
        'Quiet',
      ]);
      const none = await get('/telemetry/data-quality?q=no-such-machine');
      expect(none.assets).toEqual([]);
      expect(none.summary.telemetryAssets).toBe(7);
    });

    it('pages the matching entries and gives their total', async () => {
      const first = await get('/telemetry/data-quality?limit=3');
      expect(names(first)).toEqual(['Erring', 'Fine', 'Late']);
      expect(first.paging).toEqual({ limit: 3, offset: 0, total: 7 });
      const second = await get('/telemetry/data-quality?limit=3&offset=3');
      expect(names(second)).toEqual(['Never', 'Off', 'Poor GPS']);
      const last = await get('/telemetry/data-quality?offset=6');
      expect(names(last)).toEqual(['Quiet']);
      expect(last.paging).toEqual({ limit: 100, offset: 6, total: 7 });
      const past = await get('/telemetry/data-quality?offset=50');
      expect(past.assets).toEqual([]);
      expect(past.summary.telemetryAssets).toBe(7);

      // Offline, silent, disabled or ok, with an "i" (Erring, Fine, Quiet): Fine and Quiet; from the second.
      const combined = await get('/telemetry/data-quality?status=offline,silent,disabled,ok&q=i&limit=2&offset=1');
      expect(names(combined)).toEqual(['Quiet']);
      expect(combined.paging).toEqual({ limit: 2, offset: 1, total: 2 });
    });

    it('keeps a customer key to its own devices, whatever the filters', async () => {
      const globex = await get('/telemetry/data-quality?status=silent,delayed,offline&limit=10', fleet.globexKey);
      expect(names(globex)).toEqual(['Late', 'Quiet']);
      expect(globex.paging).toEqual({ limit: 10, offset: 0, total: 2 });
      expect(globex.summary).toMatchObject({ telemetryAssets: 2, totalAssets: 2 });
      expect((await get('/telemetry/data-quality?q=erring', fleet.globexKey)).assets).toEqual([]);
      const acme = await get('/telemetry/data-quality?q=late', fleet.acmeKey);
      expect(acme.assets).toEqual([]);
    });

    it('answers 400 naming the parameter for a bad value', async () => {
      for (const [query, expected] of [
        ['status=broken', 'status'],
        ['status=ok,', 'must be one or more of ok, delayed, offline, silent, poor_gps, errors, disabled'],
        ['status=', 'status'],
        ['q=', 'q'],
        [`q=${'x'.repeat(201)}`, 'q'],
        ['limit=0', 'limit'],
        ['limit=501', 'limit'],
        ['limit=ten', 'limit'],
        ['offset=-1', 'offset'],
      ] as const) {
        const response = await api.external(`/telemetry/data-quality?${query}`, fleet.tenantKey);
        const body = await json(response);
        expect(response.status, query).toBe(400);
        expect(body.error, query).toContain(expected);
      }
    });
  });

  it('counts what falls inside the whole hours around the range, and echoes those hours', async () => {
    // The counters have an hour grain: a range is widened to whole hours, so the counts
    // are exact for the `from`/`to` the answer gives (they were the requested instants
    // when counts were taken from raw rows).
    const from = new Date(Date.now() - 65 * 60_000).toISOString();
    const to = new Date(Date.now() - 25 * 60_000).toISOString();
    const window = await get(`/telemetry/data-quality?from=${from}&to=${to}`);
    const hourFrom = Math.floor(Date.parse(from) / HOUR) * HOUR;
    const hourTo = Math.ceil(Date.parse(to) / HOUR) * HOUR;
    expect(window.from).toBe(new Date(hourFrom).toISOString());
    expect(window.to).toBe(new Date(hourTo).toISOString());
    const inHours = (name: string) => received[name]!.filter((ms) => ms >= hourFrom && ms < hourTo).length;
    expect(inHours('Fine')).toBeGreaterThan(0);
    expect(entry(window, 'Fine').messageCount).toBe(inHours('Fine'));
    expect(entry(window, 'Erring').messageCount).toBe(inHours('Erring'));
    expect(entry(window, 'Late').messageCount).toBe(inHours('Late'));
    expect(window.summary.analyticsUpdatedAt).toBe(window.generatedAt);

    // Asked for those whole hours, the answer is the same and echoes them unchanged.
    const aligned = await get(
      `/telemetry/data-quality?from=${new Date(hourFrom).toISOString()}&to=${new Date(hourTo).toISOString()}`,
    );
    expect(aligned.from).toBe(window.from);
    expect(aligned.to).toBe(window.to);
    const counts = (body: any) => body.assets.map(({ notes: _notes, lastSeenAt: _seen, ...rest }: any) => rest);
    expect(counts(aligned)).toEqual(counts(window));

    // Hours before any traffic count nothing.
    const hourNow = Math.floor(Date.now() / HOUR) * HOUR;
    const empty = await get(
      `/telemetry/data-quality?from=${new Date(hourNow - 30 * HOUR).toISOString()}&to=${new Date(hourNow - 26 * HOUR).toISOString()}`,
    );
    expect(empty.summary).toMatchObject({ messageCount: 0, silverEvents: 0, assetsWithData: 0 });
  });

  it('takes the error-rate and GPS thresholds from the configuration', async () => {
    const lenient = await startTestApi(db.pool, db.url, {
      GANTRY_QUALITY_MAX_ERROR_PERCENT: '30',
      GANTRY_QUALITY_MIN_GPS_OK_PERCENT: '70',
    });
    try {
      const body = await json(await lenient.external('/telemetry/data-quality', fleet.tenantKey));
      expect(entry(body, 'Erring').status).toBe('ok');
      expect(entry(body, 'Poor GPS').status).toBe('ok');
    } finally {
      await lenient.close();
    }
  });

  it('says not_configured for a key without telemetry, and 400 for bad input', async () => {
    const other = await provisioning.createApiKey(provisioner(db.pool), fleet.tenantId, {
      name: 'nobody',
      customerName: 'Initech',
    });
    const empty = await get('/telemetry/data-quality', other.key);
    expect(empty).toMatchObject({
      telemetryEnabled: false,
      capabilityState: 'not_configured',
      assets: [],
      summary: { totalAssets: 0, qualityScore: 0 },
    });
    for (const [query, expected] of [
      ['from=2026-01-01&to=2026-03-01', 'at most 31 days'],
      ['assetId=1', 'assetId'],
      ['from=tomorrow', 'from'],
    ] as const) {
      const response = await api.external(`/telemetry/data-quality?${query}`, fleet.tenantKey);
      expect(response.status, query).toBe(400);
      expect((await json(response)).error).toContain(expected);
    }
  });

  it('counts a topic type that is none of the message types', async () => {
    // Quiet: 20 hours ago two messages on an unknown topic type and a rejected fix.
    await sendMessages('Quiet', [
      ...times(2, 20 * 60, 'weather', { status: 'rejected', error: 'unknown_message_type' }),
      ...times(1, 20 * 60 - 5, 'gps', { status: 'rejected', error: 'invalid_json' }),
    ]);
    const to = new Date(Math.ceil(Date.now() / HOUR) * HOUR);
    const range = { from: new Date(to.getTime() - 24 * HOUR).toISOString(), to: to.toISOString() };
    const body = await get(`/telemetry/data-quality?from=${range.from}&to=${range.to}`);
    expect(body.messageTypes).toContainEqual({
      messageType: 'weather',
      deviceCount: 1,
      errorMessages: 2,
      messageCount: 2,
      errorRate: 100,
    });
    expect(entry(body, 'Quiet')).toMatchObject({ messageCount: 8, errorMessages: 3, parsedMessages: 5 });
  });

  it('leaves out the counts of a device whose asset was deleted', async () => {
    // A tenant key's answer reads the counters by tenant: the device that lost its asset
    // still has counter rows there, and they must not reach the totals.
    const deps = provisioner(db.pool);
    const asset = await provisioning.createAsset(deps, fleet.tenantId, { name: 'Scrapped', identifier: 'SCRAPPED' });
    const device = await provisioning.createDevice(deps, fleet.tenantId, {
      deviceId: 'dev-scrapped',
      assetId: asset.id,
    });
    const scrapped = {
      id: asset.id,
      name: 'Scrapped',
      identifier: 'SCRAPPED',
      customerName: '',
      deviceUuid: device.id,
      deviceId: 'dev-scrapped',
    };
    await insertMessages(db.pool, fleet.tenantId, scrapped, [
      ...times(7, 50, 'identifier'),
      ...times(2, 40, 'gps', { status: 'rejected', error: 'invalid_json' }),
    ]);
    const before = await get('/telemetry/data-quality');
    expect(entry(before, 'Scrapped')).toMatchObject({ messageCount: 9, errorMessages: 2 });
    expect(before.messageTypes.map((item: any) => item.messageType)).toContain('identifier');
    expect(before.recentErrors.map((item: any) => item.deviceId)).toContain('dev-scrapped');

    await db.pool.query('DELETE FROM assets WHERE id = $1', [asset.id]);
    const after = await get('/telemetry/data-quality');
    expect(entry(after, 'Scrapped')).toBeUndefined();
    expect(after.messageTypes.map((item: any) => item.messageType)).not.toContain('identifier');
    expect(after.summary.messageCount).toBe(before.summary.messageCount - 9);
    expect(after.summary.errorMessages).toBe(before.summary.errorMessages - 2);
    expect(after.recentErrors.map((item: any) => item.deviceId)).not.toContain('dev-scrapped');
  });

  it('answers the last 24 hours from the counter window when it holds them, the same as from the hourly counters', async () => {
    // The fixtures' recount built the window; a late batch for an hour inside it moves it too.
    await sendMessages('Fine', times(3, 300, 'hourmeter'));
    expect(await counterWindowDrift(db.pool)).toBe(0);
    const strip = (body: any) => ({
      ...body,
      generatedAt: null,
      summary: { ...body.summary, analyticsUpdatedAt: null },
    });
    const windowed = await get('/telemetry/data-quality');
    const page = await get('/telemetry/data-quality?limit=2&offset=1&status=ok,poor_gps,errors,delayed');
    // Without a window for these hours the same answer comes from the hourly rows.
    const { rows } = await db.pool.query<{ start: Date }>(
      'SELECT window_start AS start FROM device_counts_window_start',
    );
    await db.pool.query(`UPDATE device_counts_window_start SET window_start = window_start - INTERVAL '1 hour'`);
    expect(strip(await get('/telemetry/data-quality'))).toEqual(strip(windowed));
    expect(strip(await get('/telemetry/data-quality?limit=2&offset=1&status=ok,poor_gps,errors,delayed'))).toEqual(
      strip(page),
    );
    // The window is what the default range reads: a count changed there shows in the answer.
    await db.pool.query('UPDATE device_counts_window_start SET window_start = $1', [rows[0]!.start]);
    await db.pool.query(
      `UPDATE device_counts_window SET heartbeat_readings = heartbeat_readings + 1000 WHERE device_id = $1`,
      [fleet.byName.Fine!.deviceUuid],
    );
    try {
      const changed = await get('/telemetry/data-quality');
      expect(changed.summary.silverEvents).toBe(windowed.summary.silverEvents + 1000);
      expect(entry(changed, 'Fine').heartbeatEvents).toBe(entry(windowed, 'Fine').heartbeatEvents + 1000);
    } finally {
      await db.pool.query(
        `UPDATE device_counts_window SET heartbeat_readings = heartbeat_readings - 1000 WHERE device_id = $1`,
        [fleet.byName.Fine!.deviceUuid],
      );
    }
    expect(await counterWindowDrift(db.pool)).toBe(0);
  });
});
