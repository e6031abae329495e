import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export interface LoggerOptions {
  level: LevelWithSilent;
  format: 'json' | 'pretty';
  name?: string;
  /** Where JSON lines go instead of stdout (tests capture logs this way). */
  destination?: NodeJS.WritableStream;
}

/** Paths never written to logs, whatever a caller passes in. */
const redactPaths = [
  'key',
  'apiKey',
  'secret',
  'token',
  'password',
  'authorization',
  'headers.authorization',
  'headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  '*.key',
  '*.secret',
  '*.password',
];

export function createLogger(options: LoggerOptions): Logger {
  if (options.destination) {
    return pino(
      { name: options.name ?? 'gantry', level: options.level, redact: { paths: redactPaths, censor: '[redacted]' } },
      options.destination,
    );
  }
  return pino({
    name: options.name ?? 'gantry',
    level: options.level,
    redact: { paths: redactPaths, censor: '[redacted]' },
    ...(options.format === 'pretty'
      ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } }
      : {}),
  });
}

/** A logger that writes nothing, for tests and library defaults. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
