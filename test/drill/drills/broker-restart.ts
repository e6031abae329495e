import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestBroker, type TestBroker } from '../../support/broker.ts';
import { createDrillDatabase } from '../database.ts';
import { metricSum, runIngestDrill, scrape } from '../ingest-run.ts';
import type { DrillContext } from '../report.ts';

/** The pid of the Mosquitto this TestBroker runs (its command line names the broker's own config file). */
function brokerPid(broker: TestBroker): number | null {
  const config = path.join(broker.dataDir, 'mosquitto.conf');
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.includes(config)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

/**
 * broker-restart — Mosquitto restarted (TestBroker.restart(): SIGTERM, which saves
 * the persistent sessions, and started again at once) when 30 % of the messages are
 * published; then stopped with SIGTERM at 60 %, kept down DRILL_BROKER_DOWN_SECONDS
 * (10), and started again with restart(). The publisher and ingest reconnect by
 * themselves; ingest's persistent session brings back what was queued for it.
 * Ingest subscribes plainly (GANTRY_INGEST_SHARED_GROUP empty), as one ingest process on
 * Mosquitto should (docker-compose.yml): Mosquitto 2.0 does not keep shared subscriptions
 * across a restart. DRILL_BROKER_SUBSCRIPTION=shared runs it through the shared group
 * instead, to show what that costs.
 */
export async function brokerRestartDrill({ report, cleanup, messages, devices }: DrillContext): Promise<void> {
  const downSeconds = Number(process.env.DRILL_BROKER_DOWN_SECONDS ?? 10);
  const plain = process.env.DRILL_BROKER_SUBSCRIPTION !== 'shared';
  const db = await createDrillDatabase('broker');
  cleanup.add(`database ${db.name}`, () => db.drop());
  const broker = await startTestBroker();
  cleanup.add('broker', () => broker.stop());
  report.step(`database ${db.name} migrated, Mosquitto on port ${broker.port}`);
  report.step(
    plain
      ? 'ingest subscribes plainly, as one ingest process on Mosquitto should (DRILL_BROKER_SUBSCRIPTION=shared for the shared group)'
      : 'ingest subscribes through the shared group (DRILL_BROKER_SUBSCRIPTION=shared): Mosquitto 2.0 does not keep it across a restart',
  );

  await runIngestDrill(
    {
      report,
      cleanup,
      label: 'broker',
      databaseUrl: db.url,
      pool: db.pool,
      brokerUrl: broker.url,
      messages,
      devices,
      ...(plain ? { ingestEnv: { GANTRY_INGEST_SHARED_GROUP: '' } } : {}),
    },
    async (system) => {
      const total = system.plan.total;
      const counts = async () => ({
        'publisher acknowledged': system.publisher.stats.acked,
        silver: (await system.silver()) ?? 0,
      });
      const connected = async () => metricSum(await scrape(system.ingest()), 'gantry_ingest_mqtt_connected');
      await system.until('30 % published', () => system.publisher.stats.acked >= total * 0.3);
      await broker.restart();
      report.step('broker restarted (TestBroker.restart(): SIGTERM, started again at once)', await counts());
      await system.until('ingest to reconnect', async () => (await connected()) === 1, 120_000);

      await system.until('60 % published', () => system.publisher.stats.acked >= total * 0.6);
      const pid = brokerPid(broker);
      if (pid === null) throw new Error('cannot find the broker process');
      const before = await counts();
      process.kill(pid, 'SIGTERM');
      await system.until('the broker to exit', () => brokerPid(broker) === null, 120_000);
      report.step(`broker stopped (SIGTERM to pid ${pid}), staying down ${downSeconds} s`, before);
      let sawDisconnected = false;
      const ends = Date.now() + downSeconds * 1000;
      while (Date.now() < ends) {
        if ((await connected()) === 0) sawDisconnected = true;
        await sleep(250);
      }
      const during = await counts();
      await broker.restart();
      report.step('broker started again (TestBroker.restart(): same port and data)', during);
      report.check(
        'the outage was part-way',
        during['publisher acknowledged'] < total && during.silver < total,
        `publisher acknowledged ${((100 * during['publisher acknowledged']) / total).toFixed(1)} %, silver ${((100 * during.silver) / total).toFixed(1)} % when it ended`,
      );
      await system.until('ingest to reconnect', async () => (await connected()) === 1, 120_000);
      await system.until(
        'the publisher to reconnect',
        () => (system.publisher.stats.reconnects ?? 0) >= 4 || system.publisher.stats.acked >= total,
        120_000,
      );
      report.step('ingest and publisher connected again', {
        ...(await counts()),
        'publisher reconnects': system.publisher.stats.reconnects ?? 0,
      });
      report.check(
        'publisher and ingest reconnected after each restart',
        (system.publisher.stats.reconnects ?? 0) >= 4 && sawDisconnected,
        `publisher: ${system.publisher.stats.reconnects ?? 0} reconnects (2 connections × 2 restarts); ingest: disconnected during the outage${sawDisconnected ? '' : ' (NOT SEEN)'}, connected after each restart`,
      );
    },
  );
}
