import { migrateDatabase } from '@gantry/db';
import type { Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'Apply database migrations (safe to run twice, or from two processes at once)',
  usage: 'gantry migrate',
  run: (_argv, context) =>
    withDatabase(context, async (url) => {
      const { config, logger, print } = context;
      const result = await migrateDatabase(url, {
        storageMode: config.storageMode,
        retention: config.retention,
        logger,
      });
      print(`storage mode: ${result.storageMode}`);
      print(result.applied.length === 0 ? 'already up to date' : `applied: ${result.applied.join(', ')}`);
    }),
};
