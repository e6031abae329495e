import { checkTimescaleAvailability, createPool, readDatabaseStatus } from '@gantry/db';
import type { Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';

export const statusCommand: Command = {
  name: 'status',
  summary: 'Show the storage mode, migrations and gold coverage of the database',
  usage: 'gantry status [--json]',
  run: (argv, context) =>
    withDatabase(context, async (url) => {
      const { print } = context;
      const pool = createPool(url, { max: 1, applicationName: 'gantry-cli' });
      try {
        const status = await readDatabaseStatus(pool);
        const timescale = await checkTimescaleAvailability(pool);
        if (argv.includes('--json')) {
          print(JSON.stringify({ ...status, timescaleAvailable: timescale.available }, null, 2));
          return;
        }
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
