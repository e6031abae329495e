import { setTimeout as sleep } from 'node:timers/promises';
import { createPool } from '@gantry/db';
import { startTestBroker } from '../../support/broker.ts';
import { startPrivatePostgres } from '../../support/private-postgres.ts';
import { migrateForDrill } from '../database.ts';
import { metricSum, runIngestDrill, scrape } from '../ingest-run.ts';
import type { DrillContext } from '../report.ts';

/**
 * postgres-restart — ingest and worker against a private PostgreSQL cluster, stopped
 * (fast shutdown: every connection cut) once 30 % of the readings are stored, kept
 * down DRILL_POSTGRES_DOWN_SECONDS (10), and started again.
 */
export async function postgresRestartDrill({ report, cleanup, messages, devices }: DrillContext): Promise<void> {
  const downSeconds = Number(process.env.DRILL_POSTGRES_DOWN_SECONDS ?? 10);
  const server = await startPrivatePostgres();
  cleanup.add('private PostgreSQL', () => server.destroy());
  await migrateForDrill(server.url);
  const pool = createPool(server.url, { max: 6, applicationName: 'gantry-drill' });
  cleanup.add('drill pool', () => pool.end());
  const broker = await startTestBroker();
  cleanup.add('broker', () => broker.stop());
  report.step(`private PostgreSQL on port ${server.port} migrated, Mosquitto on port ${broker.port}`);

  await runIngestDrill(
    { report, cleanup, label: 'pg', databaseUrl: server.url, pool, brokerUrl: broker.url, messages, devices },
    async (system) => {
      const total = system.plan.total;
      await system.waitForSilver(Math.round(total * 0.3));
      const retriesBefore = metricSum(await scrape(system.ingest()), 'gantry_ingest_commit_retries_total');
      await server.stop();
      report.step('PostgreSQL stopped (pg_ctl stop -m fast)', { 'ingest commit retries': retriesBefore });
      let maxUnacknowledged = 0;
      const ends = Date.now() + downSeconds * 1000;
      while (Date.now() < ends) {
        maxUnacknowledged = Math.max(
          maxUnacknowledged,
          metricSum(await scrape(system.ingest()), 'gantry_ingest_unacknowledged_messages'),
        );
        await sleep(250);
      }
      const ingestMetrics = await scrape(system.ingest());
      const retries = metricSum(ingestMetrics, 'gantry_ingest_commit_retries_total') - retriesBefore;
      await server.start();
      report.step(`PostgreSQL started again after ${downSeconds} s`, {
        'ingest commit retries meanwhile': retries,
        'most un-acknowledged in ingest': maxUnacknowledged,
      });
      report.check(
        'the outage reached ingest',
        retries > 0 && maxUnacknowledged > 0,
        `${retries} commit retries, up to ${maxUnacknowledged} messages held un-acknowledged`,
      );
      const atRestart = (await system.silver()) ?? 0;
      report.step('database answering again', { silver: atRestart });
      report.check(
        'the outage was part-way',
        atRestart < total,
        `${((100 * atRestart) / total).toFixed(1)} % of the readings stored when it ended`,
      );
    },
  );
}
