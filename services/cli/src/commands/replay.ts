import { parseArgs } from 'node:util';
import { z } from 'zod';
import { createPool } from '@gantry/db';
import { DEVICE_ID_PATTERN, replayBronze } from '@gantry/ingest';
import { UsageError, type Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';

const instant = (name: string) =>
  z
    .string({ error: `--${name} is required` })
    .regex(/^\d{4}-\d{2}-\d{2}(T.+)?$/, `--${name} must be YYYY-MM-DD or an RFC 3339 date-time`)
    .transform((value, ctx) => {
      const ms = Date.parse(/T/.test(value) ? value : `${value}T00:00:00Z`);
      if (Number.isNaN(ms)) {
        ctx.addIssue({ code: 'custom', message: `--${name} is not a valid date ("${value}")` });
        return z.NEVER;
      }
      return new Date(ms);
    });

const argsSchema = z
  .object({
    from: instant('from'),
    to: instant('to'),
    device: z
      .string()
      .regex(DEVICE_ID_PATTERN, '--device must be a device id (1-64 of A-Z a-z 0-9 . _ : -)')
      .optional(),
    all: z.boolean().default(false),
  })
  .refine((args) => args.from < args.to, { message: '--from must be before --to' });

export const replayCommand: Command = {
  name: 'replay',
  summary: 'Re-parse bronze messages into silver (after a parser fix, or once an unknown device is registered)',
  usage:
    'gantry replay --from <date|date-time> --to <date|date-time> [--device <deviceId>] [--all]\n\n' +
    '  Re-runs parsing over the messages received in [from, to) that were rejected or partly\n' +
    '  rejected (--all: every message), and stores what now parses. Safe to run again.',
  async run(argv, context) {
    const { config, print } = context;
    let values: unknown;
    try {
      values = parseArgs({
        args: argv,
        options: {
          from: { type: 'string' },
          to: { type: 'string' },
          device: { type: 'string' },
          all: { type: 'boolean' },
        },
        strict: true,
      }).values;
    } catch (error) {
      throw new UsageError(`${(error as Error).message}\n\n${replayCommand.usage}`);
    }
    const parsed = argsSchema.safeParse(values);
    if (!parsed.success)
      throw new UsageError(`${parsed.error.issues.map((issue) => issue.message).join('\n')}\n\n${replayCommand.usage}`);
    const args = parsed.data;
    await withDatabase(context, async (url) => {
      const pool = createPool(url, { max: 2, applicationName: 'gantry-replay' });
      try {
        let reported = 0;
        const summary = await replayBronze(
          { pool, config },
          {
            from: args.from,
            to: args.to,
            deviceKey: args.device,
            all: args.all,
            onProgress: (progress) => {
              if (progress.messages - reported >= 50_000) {
                reported = progress.messages;
                print(`… ${progress.messages} messages re-parsed`);
              }
            },
          },
        );
        print(`messages re-parsed: ${summary.messages}`);
        print(`status changed:     ${summary.changed}`);
        print(`readings added:     ${summary.readingsAdded}`);
        print(
          `now: ${summary.statuses.accepted} accepted, ${summary.statuses.partial} partial, ` +
            `${summary.statuses.duplicate} duplicate, ${summary.statuses.rejected} rejected`,
        );
      } finally {
        await pool.end();
      }
    });
  },
};
