import { parseArgs } from 'node:util';
import { unknownDevices } from '@gantry/api';
import { createOutbox, createPool } from '@gantry/db';
import { replayBronze } from '@gantry/ingest';
import { type Command, UsageError } from '../command.ts';
import { withDatabase } from '../with-database.ts';

/** The parsed arguments, or a usage error naming what was wrong. */
function parse<T>(usage: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${usage}`);
  }
}

export const unknownDevicesCommand: Command = {
  name: 'unknown-devices',
  summary: 'List device ids seen on the broker that no tenant has registered (first/last seen, messages, a sample)',
  usage: 'gantry unknown-devices [--limit <1-500>] [--json]',
  async run(argv, context) {
    const { values } = parse(this.usage, () =>
      parseArgs({ args: argv, options: { limit: { type: 'string' }, json: { type: 'boolean' } }, strict: true }),
    );
    const query = unknownDevices.UnknownDevicesQuery.safeParse({ limit: values.limit });
    if (!query.success) throw new UsageError(`--limit ${query.error.issues[0]?.message ?? 'is invalid'}`);
    await withDatabase(context, async (url) => {
      const pool = createPool(url, { max: 1, applicationName: 'gantry-cli' });
      try {
        const list = await unknownDevices.listUnknownDevices(
          { pool, outbox: createOutbox({ maxAttempts: context.config.webhooks.maxAttempts }) },
          query.data,
        );
        if (values.json) {
          context.print(JSON.stringify(list, null, 2));
          return;
        }
        if (list.items.length === 0) {
          context.print('no unknown devices: every device id seen on the broker is registered');
          return;
        }
        context.print(
          `${'device id'.padEnd(24)} ${'first seen'.padEnd(24)} ${'last seen'.padEnd(24)} messages  sample`,
        );
        for (const item of list.items) {
          const sample = item.sample.payload.replace(/\s+/g, ' ').slice(0, 60);
          context.print(
            `${item.deviceId.padEnd(24)} ${item.firstSeenAt?.padEnd(24)} ${item.lastSeenAt?.padEnd(24)} ${String(item.messageCount).padStart(8)}  ${item.sample.topic.split('/').pop()} ${sample}`,
          );
        }
        if (list.total > list.items.length) context.print(`… ${list.total - list.items.length} more (--limit)`);
        context.print('Register one: gantry register <deviceId> --asset <assetId>');
      } finally {
        await pool.end();
      }
    });
  },
};

export const registerCommand: Command = {
  name: 'register',
  summary: 'Register a device from `gantry unknown-devices` onto an asset (optionally re-parse what it sent before)',
  usage:
    'gantry register <deviceId> --asset <assetId> [--name <displayName>] [--replay]\n\n' +
    '  The device joins the asset’s tenant and its next messages are accepted. --replay also\n' +
    '  re-parses the messages it sent since it was first seen (kept in bronze as unknown_device).',
  async run(argv, context) {
    const { values, positionals } = parse(this.usage, () =>
      parseArgs({
        args: argv,
        options: { asset: { type: 'string' }, name: { type: 'string' }, replay: { type: 'boolean' } },
        allowPositionals: true,
        strict: true,
      }),
    );
    const deviceId = positionals[0];
    if (!deviceId) throw new UsageError(`the device id is required\n\n${this.usage}`);
    const body = unknownDevices.UnknownDeviceRegister.safeParse({ assetId: values.asset, displayName: values.name });
    if (!body.success) {
      const issue = body.error.issues[0];
      const field = issue?.path[0] === 'assetId' ? '--asset' : '--name';
      throw new UsageError(
        `${field} ${values.asset === undefined && field === '--asset' ? 'is required' : issue?.message}\n\n${this.usage}`,
      );
    }
    await withDatabase(context, async (url) => {
      const pool = createPool(url, { max: 2, applicationName: 'gantry-cli' });
      try {
        const deps = { pool, outbox: createOutbox({ maxAttempts: context.config.webhooks.maxAttempts }) };
        const registered = await unknownDevices.registerUnknownDevice(deps, deviceId, body.data);
        context.print(JSON.stringify(registered, null, 2));
        if (values.replay && registered.seen.firstSeenAt) {
          const summary = await replayBronze(
            { pool, config: context.config },
            { from: new Date(registered.seen.firstSeenAt), to: new Date(Date.now() + 1000), deviceKey: deviceId },
          );
          context.print(
            `re-parsed ${summary.messages} earlier messages: ${summary.readingsAdded} readings added, ` +
              `${summary.statuses.accepted} accepted, ${summary.statuses.rejected} still rejected`,
          );
        }
      } finally {
        await pool.end();
      }
    });
  },
};
