import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createOutbox, createPool, type Pool } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { createPublisher, publishMessages } from '@gantry/simulator';
import { startTestBroker } from '../../support/broker.ts';
import { provisionFleetBulk, uniqueDeviceIds } from '../../support/ingest.ts';
import { postgresOwnedTempDir, runAsPostgres, startPrivatePostgres } from '../../support/private-postgres.ts';
import { freePort } from '../../support/broker.ts';
import { repoRoot, spawnService } from '../../support/processes.ts';
import { migrateForDrill } from '../database.ts';
import { compareWithCleanRun, waitForWorkerIdle } from '../derived.ts';
import { fleetMessages, planFleet, storeExpectedKeys } from '../fleet.ts';
import { type DrillContext, fmt } from '../report.ts';

/**
 * restore — backups that restore: a private PostgreSQL archiving its WAL to pgBackRest
 * (deploy/pgbackrest/pgbackrest.conf, a local repository), Gantry ingesting three groups
 * of machines one after the other: a full backup after the first, a target time noted
 * after the second, then the third. The backup is restored to the target time into a
 * new data directory, PostgreSQL and Gantry's worker and API start on it, and the drill
 * checks: every reading of the first two groups there, none of the third, counters and
 * derived relations equal to a recount and a fresh derivation of the restored silver.
 */
const STANZA = 'gantry';

async function count(pool: Pool, sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ count: string }>(sql, values);
  return Number(rows[0]!.count);
}

async function until(what: string, predicate: () => Promise<boolean>, timeoutMs = 10 * 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}

export async function restoreDrill({ report, cleanup, devices }: DrillContext): Promise<void> {
  const messages = Number(process.env.DRILL_RESTORE_MESSAGES ?? 60_000);
  const backup = postgresOwnedTempDir('gantry-pgbackrest-');
  cleanup.add('backup repository', async () => rmSync(backup, { recursive: true, force: true }));
  const config = path.join(backup, 'pgbackrest.conf');
  const pgbackrest = (...args: string[]) =>
    runAsPostgres('pgbackrest', [`--config=${config}`, `--stanza=${STANZA}`, ...args]).catch((error: unknown) => {
      const stderr = (error as { stderr?: string }).stderr?.trim() ?? '';
      throw new Error(`pgbackrest ${args.at(-1)} failed: ${stderr.replaceAll('\n', ' ').slice(0, 300)}`);
    });
  const server = await startPrivatePostgres({
    archive_mode: 'on',
    archive_command: `pgbackrest --config=${config} --stanza=${STANZA} archive-push %p`,
    wal_level: 'replica',
  });
  cleanup.add('private PostgreSQL (origin)', () => server.destroy());
  // Created as the PostgreSQL user, which runs archive_command and pgbackrest.
  await runAsPostgres(
    'mkdir',
    ['repo', 'log', 'lock'].map((dir) => path.join(backup, dir)),
  );
  const template = readFileSync(path.join(repoRoot, 'deploy/pgbackrest/pgbackrest.conf'), 'utf8');
  const values: Record<string, string> = {
    REPO_PATH: path.join(backup, 'repo'),
    LOG_PATH: path.join(backup, 'log'),
    LOCK_PATH: path.join(backup, 'lock'),
    PG_DATA: server.dataDir,
    PG_PORT: String(server.port),
    PG_SOCKET: server.dir,
  };
  writeFileSync(
    config,
    template.replace(/\{\{([A-Z_]+)\}\}/g, (_, name: string) => values[name]!),
  );
  await pgbackrest('stanza-create');
  await pgbackrest('check');
  report.step(
    `private PostgreSQL on port ${server.port} archiving to pgBackRest (stanza ${STANZA}, repository ${values.REPO_PATH})`,
  );

  await migrateForDrill(server.url);
  const pool = createPool(server.url, { max: 4, applicationName: 'gantry-drill' });
  cleanup.add('origin pool', () => pool.end());
  const deviceIds = uniqueDeviceIds(Math.min(devices, 150), 'drill-restore');
  const plan = planFleet({ deviceIds, total: messages });
  const fleet = await provisionFleetBulk(pool, deviceIds, 'Drill terminal (restore)');
  const uuids = deviceIds.map((deviceId) => fleet.byDeviceId.get(deviceId)!.id);
  await storeExpectedKeys(pool, plan, uuids);
  const key = await provisioning.createApiKey({ pool, outbox: createOutbox({ maxAttempts: 3 }) }, fleet.tenantId, {
    name: 'restore drill',
  });
  // Three groups of machines, published one after the other: before the backup, before the target, after it.
  const third = Math.ceil(deviceIds.length / 3);
  const groups = [0, 1, 2].map((index) => deviceIds.slice(index * third, (index + 1) * third));
  const groupUuids = groups.map((group) => group.map((deviceId) => fleet.byDeviceId.get(deviceId)!.id));
  const all = [...fleetMessages(plan)];

  const broker = await startTestBroker();
  cleanup.add('broker', () => broker.stop());
  const run = randomBytes(3).toString('hex');
  const env = { GANTRY_DATABASE_URL: server.url };
  const ingest = await spawnService('ingest', {
    env: {
      ...env,
      GANTRY_MQTT_URL: broker.url,
      GANTRY_INGEST_CLIENT_ID: `gantry-ingest-drill-restore-${run}`,
      GANTRY_INGEST_SHARED_GROUP: `drill-restore-${run}`,
    },
  });
  cleanup.add('ingest', () => ingest.kill());
  const worker = await spawnService('worker', { env });
  cleanup.add('worker', () => worker.kill());
  const publisher = await createPublisher({ mqttUrl: broker.url, clientIdPrefix: `drill-pub-restore-${run}` });
  cleanup.add('publisher', () => publisher.close());

  const expectedIn = (index: number) =>
    count(pool, 'SELECT count(*) AS count FROM drill_expected WHERE device_id = ANY($1::uuid[])', [groupUuids[index]]);
  const storedIn = (target: Pool, index: number) =>
    count(target, 'SELECT count(*) AS count FROM telemetry_readings WHERE device_id = ANY($1::uuid[])', [
      groupUuids[index],
    ]);
  const publishGroup = async (index: number) => {
    const members = new Set(groups[index]);
    const published = await publishMessages(
      publisher,
      all.filter((message) => members.has(message.deviceId)),
    );
    const expected = await expectedIn(index);
    await until(`group ${index + 1} stored`, async () => (await storedIn(pool, index)) >= expected);
    report.step(
      `group ${index + 1}: ${fmt(groups[index]!.length)} machines, ${fmt(published)} messages published and stored`,
    );
  };

  await publishGroup(0);
  await pgbackrest('--type=full', 'backup');
  report.step('full backup taken (pgbackrest backup --type=full)');
  await publishGroup(1);
  await waitForWorkerIdle(pool, report);
  const { rows } = await pool.query<{ target: string }>('SELECT clock_timestamp()::text AS target');
  const target = rows[0]!.target;
  report.step(`target time noted: ${target}`);
  await sleep(1000);
  await publishGroup(2);
  await waitForWorkerIdle(pool, report);
  // Closes the current WAL segment and waits until it is archived: the archive reaches past the target.
  await pgbackrest('check');
  const info = await pgbackrest('info');
  report.step('group 3 archived; pgbackrest info', {
    backups: (info.stdout.match(/full backup/g) ?? []).length,
  });
  await ingest.stop();
  await worker.stop();
  await publisher.close();

  // The restore: into a new data directory, to the target time, then promoted.
  const restoredDir = postgresOwnedTempDir('gantry-pg-restored-');
  cleanup.add('restored data directory', async () => rmSync(restoredDir, { recursive: true, force: true }));
  const restoredData = path.join(restoredDir, 'data');
  const restoredPort = await freePort();
  await pgbackrest(
    `--pg1-path=${restoredData}`,
    '--type=time',
    `--target=${target}`,
    '--target-action=promote',
    '--archive-mode=off',
    'restore',
  );
  report.step(`restored to ${target} into ${restoredData}`);
  const pgCtl = (...args: string[]) => runAsPostgres('pg_ctl', ['-D', restoredData, ...args]);
  await pgCtl(
    '-o',
    `-p ${restoredPort} -k ${restoredDir} -c listen_addresses=127.0.0.1`,
    '-l',
    path.join(restoredDir, 'server.log'),
    '-w',
    '-t',
    '300',
    'start',
  );
  cleanup.add(
    'restored PostgreSQL',
    async () => void (await pgCtl('-m', 'immediate', '-w', 'stop').catch(() => undefined)),
  );
  const restoredUrl = `postgresql://postgres@127.0.0.1:${restoredPort}/gantry_outage_test`;
  const restored = createPool(restoredUrl, { max: 6, applicationName: 'gantry-drill' });
  cleanup.add('restored pool', () => restored.end());
  await until('the restored copy promoted', async () => {
    const state = await restored
      .query<{ recovery: boolean }>('SELECT pg_is_in_recovery() AS recovery')
      .catch(() => null);
    return state?.rows[0]?.recovery === false;
  });
  report.step(`restored PostgreSQL on port ${restoredPort} promoted`);

  const expected = [await expectedIn(0), await expectedIn(1), await expectedIn(2)];
  const present = [await storedIn(restored, 0), await storedIn(restored, 1), await storedIn(restored, 2)];
  const lost = await count(
    restored,
    `SELECT count(*) AS count FROM drill_expected e
      WHERE e.device_id = ANY($1::uuid[])
        AND NOT EXISTS (SELECT 1 FROM telemetry_readings r WHERE r.device_id = e.device_id AND r.type = e.type AND r.ts = e.ts)`,
    [[...groupUuids[0]!, ...groupUuids[1]!]],
  );
  report.count(
    'readings before the target: expected / restored / missing',
    `${fmt(expected[0]! + expected[1]!)} / ${fmt(present[0]! + present[1]!)} / ${fmt(lost)}`,
  );
  report.count('readings after the target: on the origin / restored', `${fmt(expected[2]!)} / ${fmt(present[2]!)}`);
  report.check(
    'every reading up to the target is in the restored copy, once',
    lost === 0 && present[0]! + present[1]! === expected[0]! + expected[1]!,
    `${fmt(lost)} missing, ${fmt(present[0]! + present[1]!)} rows for ${fmt(expected[0]! + expected[1]!)} readings`,
  );
  report.check(
    'no reading after the target is in the restored copy',
    present[2] === 0 && expected[2]! > 0,
    `${fmt(present[2]!)} of the ${fmt(expected[2]!)} readings published after the target`,
  );

  const restoredEnv = { GANTRY_DATABASE_URL: restoredUrl };
  const restoredWorker = await spawnService('worker', { env: restoredEnv });
  cleanup.add('worker on the restored copy', () => restoredWorker.kill());
  const api = await spawnService('api', { env: restoredEnv });
  cleanup.add('API on the restored copy', () => api.kill());
  await waitForWorkerIdle(restored, report);
  const answer = await fetch(`${api.url}/api/external/v1/telemetry/devices?limit=500`, {
    headers: { 'X-API-Key': key.key },
  });
  const body = (await answer.json().catch(() => null)) as { items?: unknown[] } | null;
  report.check(
    'the API answers on the restored copy',
    answer.status === 200 && Array.isArray(body?.items),
    `GET /telemetry/devices: ${answer.status}, ${body?.items?.length ?? 0} devices`,
  );
  await restoredWorker.stop();
  await api.stop();
  await compareWithCleanRun(restored, restoredUrl, report);
}
