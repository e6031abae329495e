import { checkTimescaleAvailability, createPool, readDatabaseStatus } from '@gantry/db';
import type { Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';
import { readRunningFile } from '../running.ts';

export const statusCommand: Command = {
  name: 'status',
  summary:
    'Show the ports of the running `gantry start`, and the storage mode, migrations and gold coverage of the database',
  usage: 'gantry status [--json]',
  run: (argv, context) =>
    withDatabase(context, async (url) => {
      const { print } = context;
      const pool = createPool(url, { max: 1, applicationName: 'gantry-cli' });
      try {
        const status = await readDatabaseStatus(pool);
        const timescale = await checkTimescaleAvailability(pool);
        const running = await readRunningFile(context.config.dataDir);
        if (argv.includes('--json')) {
          print(JSON.stringify({ ...status, timescaleAvailable: timescale.available, running }, null, 2));
          return;
        }
        if (running) {
          const { api, mqtt, postgres } = running.ports;
          const database = postgres === null ? '' : `, embedded PostgreSQL on ${postgres}`;
          print(`gantry start:     running (pid ${running.pid}): API on ${api}, MQTT on ${mqtt}${database}`);
        } else print('gantry start:     not running');
        print(`storage mode:     ${status.storageMode ?? 'not migrated yet'}`);
        print(`postgresql:       ${status.serverVersion}`);
        print(`timescaledb:      ${status.timescaledbVersion ?? `not in use (${timescale.reason})`}`);
        print(`migrations:       ${status.migrations.length} applied (${status.migrations.at(-1) ?? 'none'})`);
        for (const gold of status.gold) {
          const coverage = gold.coverageTo
            ? `${gold.coverageFrom?.toISOString() ?? '…'} → ${gold.coverageTo.toISOString()}`
            : 'no coverage yet';
          print(`gold ${gold.relation.padEnd(22)} ${gold.status.padEnd(10)} ${coverage}`);
        }
      } finally {
        await pool.end();
      }
    }),
};
