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
  /** Help for `gantry <name> … --help` when it depends on the arguments (default: usage). */
  help?(argv: string[]): string;
  run(argv: string[], context: CommandContext): Promise<void>;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
