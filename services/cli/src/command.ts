import type { Config } from '@gantry/config';
import type { Logger } from '@gantry/logger';

export interface CommandContext {
  config: Config;
  logger: Logger;
  /** Lines for the user (stdout); logs go to the logger. */
  print(line: string): void;
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  run(argv: string[], context: CommandContext): Promise<void>;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The database URL a command needs; the CLI does not start an embedded server except in `start`. */
export function requireDatabaseUrl(config: Config): string {
  if (config.databaseUrl) return config.databaseUrl;
  throw new UsageError(
    'GANTRY_DATABASE_URL is not set. Set it, or run `pnpm start` (embedded PostgreSQL) and use the URL it prints.',
  );
}
