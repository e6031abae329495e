import type { Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';

export const databaseUrlCommand: Command = {
  name: 'database-url',
  summary: 'Print the database URL with its password (GANTRY_DATABASE_URL, or the embedded PostgreSQL of the data dir)',
  usage: 'gantry database-url',
  // The embedded server's password is in <data dir>/postgres-credentials.json; this puts
  // it in a URL for psql or another tool (e.g. `psql "$(pnpm -s gantry database-url)"`).
  run: (_argv, context) =>
    withDatabase(context, async (url) => {
      context.print(url);
    }),
};
