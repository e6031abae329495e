#!/usr/bin/env -S node --enable-source-maps
import { readFileSync } from 'node:fs';
import { catalog } from './catalog.ts';
import { type Command, UsageError } from './command.ts';

function help(): string {
  const width = Math.max(...catalog.map((entry) => entry.name.length));
  return [
    'gantry <command> [options]',
    '',
    ...catalog.map((entry) => `  ${entry.name.padEnd(width)}  ${entry.summary}`),
    '',
    'Configuration comes from GANTRY_* environment variables (see README.md).',
  ].join('\n');
}

/** The CLI package's version: package.json is one level up from src/ and dist/ alike. */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

// Help and version print without loading a command, the config or the logger: they answer at
// once. Everything else is imported only once the command is known.
async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    console.log(help());
    return 0;
  }
  if (name === '--version' || name === '-v') {
    console.log(`gantry ${version()}`);
    return 0;
  }
  const entry = catalog.find((candidate) => candidate.name === name);
  if (!entry) {
    console.error(`unknown command "${name}"\n\n${help()}`);
    return 2;
  }
  const command = await entry.load();
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(command.help?.(rest) ?? `${command.usage}\n\n${command.summary}`);
    return 0;
  }
  const code = await run(command, rest);
  // Long-running only when `start` succeeded; otherwise leave once output is flushed (a
  // pool or the log transport may still hold the event loop).
  if (code !== 0 || name !== 'start') setTimeout(() => process.exit(code), 100);
  return code;
}

async function run(command: Command, argv: string[]): Promise<number> {
  const [{ ConfigError, loadConfig }, { createLogger }] = await Promise.all([
    import('@gantry/config'),
    import('@gantry/logger'),
  ]);
  try {
    const config = loadConfig();
    // Command output goes to stdout; logs to stderr so output can be piped.
    const logger = createLogger({ ...config.log, format: config.log.format, name: 'gantry' });
    await command.run(argv, { config, logger, print: (line) => console.log(line) });
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
});
