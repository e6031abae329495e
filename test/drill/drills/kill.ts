import { startTestBroker } from '../../support/broker.ts';
import { createDrillDatabase } from '../database.ts';
import { metricSum, runIngestDrill, scrape } from '../ingest-run.ts';
import type { DrillContext } from '../report.ts';

/**
 * kill — SIGKILL of ingest and of the worker during a run of DRILL_MESSAGES (1,000,000)
 * readings: ingest once 30 % of the readings are stored, restarted with the same client
 * id; the worker once 60 % are stored while devices wait to be derived, restarted.
 */
export async function killDrill({ report, cleanup, messages, devices }: DrillContext): Promise<void> {
  const db = await createDrillDatabase('kill');
  cleanup.add(`database ${db.name}`, () => db.drop());
  const broker = await startTestBroker();
  cleanup.add('broker', () => broker.stop());
  report.step(`database ${db.name} migrated, Mosquitto on port ${broker.port}`);

  await runIngestDrill(
    { report, cleanup, label: 'kill', databaseUrl: db.url, pool: db.pool, brokerUrl: broker.url, messages, devices },
    async (system) => {
      const total = system.plan.total;
      await system.waitForSilver(Math.round(total * 0.3));
      const unacknowledged = metricSum(await scrape(system.ingest()), 'gantry_ingest_unacknowledged_messages');
      const ingestPid = system.ingest().pid;
      const ingestExit = await system.kill('ingest');
      const atIngestKill = (await system.silver()) ?? 0;
      report.step(`SIGKILL ingest (pid ${ingestPid})`, {
        silver: atIngestKill,
        'un-acknowledged in ingest': unacknowledged,
      });
      report.check(
        'ingest was killed part-way',
        ingestExit.signal === 'SIGKILL' && atIngestKill < total,
        `signal ${ingestExit.signal}, ${fmtShare(atIngestKill, total)} of the readings stored at the kill`,
      );
      const ingest = await system.restart('ingest');
      report.step(`ingest restarted (pid ${ingest.pid}), same client id`, { silver: (await system.silver()) ?? 0 });

      await system.waitForSilver(Math.round(total * 0.6));
      let dirty = 0;
      await system.until('devices waiting to be derived', async () => {
        const { rows } = await db.pool.query<{ count: string }>('SELECT count(*) AS count FROM derivation_queue');
        dirty = Number(rows[0]!.count);
        return dirty > 0;
      });
      const runs = metricSum(await scrape(system.worker()), 'gantry_derivation_device_runs_total');
      const workerPid = system.worker().pid;
      const workerExit = await system.kill('worker');
      const { rows } = await db.pool.query<{ segments: string; sessions: string }>(
        'SELECT (SELECT count(*) FROM telemetry_segments) AS segments, (SELECT count(*) FROM usage_sessions) AS sessions',
      );
      report.step(`SIGKILL worker (pid ${workerPid}) while it derives`, {
        'dirty devices': dirty,
        'device runs so far': runs,
        segments: Number(rows[0]!.segments),
        silver: (await system.silver()) ?? 0,
      });
      report.check(
        'worker was killed while deriving',
        workerExit.signal === 'SIGKILL' && dirty > 0 && runs > 0,
        `signal ${workerExit.signal}, ${dirty} devices dirty, ${runs} device runs done before`,
      );
      const worker = await system.restart('worker');
      report.step(`worker restarted (pid ${worker.pid})`);
    },
  );
}

const fmtShare = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1)} %`;
