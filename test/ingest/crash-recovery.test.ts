import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublisher, fleetTraffic, publishMessages } from '@gantry/simulator';
import { freePort, startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { countOf, provisionFleetBulk, uniqueDeviceIds, waitFor } from '../support/ingest.ts';
import { nodeArguments } from '../support/processes.ts';

interface IngestProcess {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: () => string;
}

/** The standalone ingest (services/ingest/dist/main.js) as its own process; resolves once /healthz says connected. */
async function spawnIngest(env: Record<string, string>): Promise<IngestProcess> {
  const port = await freePort();
  // node itself (no wrapper), so SIGKILL reaches the real process.
  const child = spawn(process.execPath, nodeArguments('ingest'), {
    cwd: new URL('../..', import.meta.url).pathname,
    env: {
      ...process.env,
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_HOST: '127.0.0.1',
      GANTRY_INGEST_METRICS_PORT: String(port),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`ingest exited early: ${stderr}`);
      return fetch(`http://127.0.0.1:${port}/healthz`).then(
        (response) => response.status,
        () => 0,
      );
    },
    (status) => status === 200,
    60_000,
    'ingest /healthz',
  );
  return { child, exited, stderr: () => stderr };
}

let db: TestDatabase;
let broker: TestBroker;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('ingest_crash');
  broker = await startTestBroker();
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await broker?.stop();
  await db?.drop();
});

describe('ingest as a process', () => {
  it('killed with SIGKILL in the middle of a 200,000-message run and restarted, leaves exactly 200,000 readings', async () => {
    const total = 200_000;
    const deviceIds = uniqueDeviceIds(300, 'crash');
    await provisionFleetBulk(db.pool, deviceIds);
    const env = {
      GANTRY_DATABASE_URL: db.url,
      GANTRY_MQTT_URL: broker.url,
      GANTRY_RUN_MIGRATIONS: 'false',
      GANTRY_INGEST_CLIENT_ID: `gantry-ingest-crash-${deviceIds[0]}`,
      GANTRY_INGEST_SHARED_GROUP: 'crash-drill',
    };
    const first = await spawnIngest(env);
    children.push(first.child);

    const publisher = await createPublisher({ mqttUrl: broker.url, window: 2000 });
    const publishing = publishMessages(
      publisher,
      fleetTraffic({ deviceIds, count: total, start: Date.now() - 2 * 3_600_000, stepMs: 20 }),
    );

    const atKill = await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= 40_000,
      120_000,
      'readings before the kill',
    );
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(atKill).toBeLessThan(total);

    const second = await spawnIngest(env);
    children.push(second.child);
    await publishing;
    await publisher.close();
    const stored = await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM telemetry_readings'),
      (count) => count >= total,
      240_000,
      'every reading',
    );

    expect(stored).toBe(total);
    expect(await countOf(db.pool, 'SELECT count(DISTINCT (device_id, type, ts)) FROM telemetry_readings')).toBe(total);
    await waitFor(
      () => countOf(db.pool, 'SELECT sum(reading_count) AS count FROM device_messages'),
      (count) => count >= total,
      30_000,
      'bronze',
    );
    // Redelivered copies are in bronze as duplicates; the new readings they carried count once.
    expect(await countOf(db.pool, 'SELECT sum(reading_count) AS count FROM device_messages')).toBe(total);
    expect(
      await countOf(db.pool, `SELECT count(*) FROM device_messages WHERE status IN ('accepted', 'duplicate')`),
    ).toBeGreaterThanOrEqual(total);

    second.child.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);
  }, 300_000);

  it('on SIGTERM commits the open batch, acknowledges it and exits 0, so nothing is delivered twice', async () => {
    const deviceIds = uniqueDeviceIds(20, 'term');
    await provisionFleetBulk(db.pool, deviceIds, 'Graceful stop');
    const env = {
      GANTRY_DATABASE_URL: db.url,
      GANTRY_MQTT_URL: broker.url,
      GANTRY_RUN_MIGRATIONS: 'false',
      GANTRY_INGEST_CLIENT_ID: `gantry-ingest-term-${deviceIds[0]}`,
      GANTRY_INGEST_SHARED_GROUP: 'term-drill',
      // One batch that only a flush closes: nothing is written before SIGTERM.
      GANTRY_INGEST_BATCH_SIZE: '100000',
      GANTRY_INGEST_BATCH_MS: '600000',
    };
    const before = await countOf(db.pool, 'SELECT count(*) FROM device_messages');
    const ingest = await spawnIngest(env);
    children.push(ingest.child);
    const publisher = await createPublisher({ mqttUrl: broker.url });
    await publishMessages(publisher, fleetTraffic({ deviceIds, count: 3000, start: Date.now() - 3_600_000, seed: 7 }));
    await publisher.close();

    ingest.child.kill('SIGTERM');
    const exit = await ingest.exited;
    expect(exit.code, ingest.stderr()).toBe(0);
    // Only the flush on SIGTERM can have written the open batch.
    const flushed = (await countOf(db.pool, 'SELECT count(*) FROM device_messages')) - before;
    expect(flushed).toBeGreaterThan(0);

    // Restarted on the same session: whatever was not yet delivered arrives now, and had
    // anything been committed without its PUBACK it would come back as a duplicate.
    const again = await spawnIngest({ ...env, GANTRY_INGEST_BATCH_MS: '50' });
    children.push(again.child);
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM device_messages'),
      (count) => count - before >= 3000,
      60_000,
      'the rest',
    );
    again.child.kill('SIGTERM');
    expect((await again.exited).code).toBe(0);
    expect((await countOf(db.pool, 'SELECT count(*) FROM device_messages')) - before).toBe(3000);
    expect(
      await countOf(
        db.pool,
        `SELECT count(*) FROM device_messages WHERE status = 'duplicate' AND device_key LIKE 'term-%'`,
      ),
    ).toBe(0);
    expect(
      await countOf(
        db.pool,
        `SELECT count(*) FROM telemetry_readings r JOIN devices d ON d.id = r.device_id WHERE d.device_id LIKE 'term-%'`,
      ),
    ).toBe(3000);
  }, 120_000);
});
