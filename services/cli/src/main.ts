import { ConfigError, loadConfig } from '@gantry/config';
import { createLogger } from '@gantry/logger';
import { UsageError, type Command } from './command.ts';
import { adminCommands } from './commands/admin.ts';
import { databaseUrlCommand } from './commands/database-url.ts';
import { demoCommand } from './commands/demo.ts';
import { migrateCommand } from './commands/migrate.ts';
import { replayCommand } from './commands/replay.ts';
import { startCommand } from './commands/start.ts';
import { statusCommand } from './commands/status.ts';
import { registerCommand, unknownDevicesCommand } from './commands/unknown-devices.ts';

const commands: Command[] = [
  startCommand,
  migrateCommand,
  statusCommand,
  databaseUrlCommand,
  demoCommand,
  replayCommand,
  unknownDevicesCommand,
  registerCommand,
  ...adminCommands,
];

function help(): string {
  const width = Math.max(...commands.map((command) => command.name.length));
  return [
    'gantry <command> [options]',
    '',
    ...commands.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    '',
    'Configuration comes from GANTRY_* environment variables (see README.md).',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    console.log(help());
    return 0;
  }
  const command = commands.find((candidate) => candidate.name === name);
  if (!command) {
    console.error(`unknown command "${name}"\n\n${help()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(command.help?.(rest) ?? `${command.usage}\n\n${command.summary}`);
    return 0;
  }
  try {
    const config = loadConfig();
    // Command output goes to stdout; logs to stderr so output can be piped.
    const logger = createLogger({ ...config.log, format: config.log.format, name: 'gantry' });
    await command.run(rest, { config, logger, print: (line) => console.log(line) });
    return 0;
  } catch (error) {
    if (error instanceof ConfigError || error instanceof UsageError) {
      console.error(error.message);
      return 2;
    }
    console.error(error instanceof Error ? error.message : String(error));
    return 1;
  }
}

// Output piped into a reader that stops early (`gantry status | head`) is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  // Long-running only when `start` succeeded; otherwise leave once output is flushed.
  if (code !== 0 || !process.argv.includes('start')) setTimeout(() => process.exit(code), 100);
});
