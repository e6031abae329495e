import { migrateDatabase } from '@gantry/db';
import { requireDatabaseUrl, type Command } from '../command.ts';

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'Apply database migrations (safe to run twice, or from two processes at once)',
  usage: 'gantry migrate',
  async run(_argv, { config, logger, print }) {
    const result = await migrateDatabase(requireDatabaseUrl(config), {
      storageMode: config.storageMode,
      retention: config.retention,
      logger,
    });
    print(`storage mode: ${result.storageMode}`);
    print(result.applied.length === 0 ? 'already up to date' : `applied: ${result.applied.join(', ')}`);
  },
};
