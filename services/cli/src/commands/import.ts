import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createOutbox, createPool } from '@gantry/db';
import { importFile, provisioning, type ImportFormat } from '@gantry/api';
import { UsageError, type Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';

const usage =
  'gantry import <file.csv|file.json> [--tenant <tenantId>]\n\n' +
  '  Imports assets and their devices, all or nothing (the admin API takes the same file at\n' +
  '  POST /api/admin/v1/tenants/{tenantId}/import). One row per device: identifier, name,\n' +
  '  assetType, customerName, displayCode, location, externalRef, deviceId, deviceName,\n' +
  '  enabled. Assets are matched by identifier, devices by deviceId: importing the same file\n' +
  '  again changes nothing. Without --tenant, the database must hold exactly one tenant.';

function formatOf(file: string, content: string): ImportFormat {
  const extension = path.extname(file).toLowerCase();
  if (extension === '.csv') return 'csv';
  if (extension === '.json') return 'json';
  return /^\s*[[{]/.test(content) ? 'json' : 'csv';
}

function parseJsonFile(file: string, content: string): unknown {
  try {
    return JSON.parse(content);
  } catch {
    throw new UsageError(`${file} is not valid JSON`);
  }
}

async function onlyTenant(deps: provisioning.ProvisioningDeps): Promise<string> {
  const tenants = await provisioning.listTenants(deps);
  if (tenants.length === 1) return tenants[0]!.id;
  const list = tenants.map((tenant) => `  ${tenant.id}  ${tenant.name}`).join('\n');
  throw new UsageError(
    tenants.length === 0 ? 'the database holds no tenant: create one first' : `--tenant is required; one of:\n${list}`,
  );
}

export const importCommand: Command = {
  name: 'import',
  summary:
    'Import assets and their devices from a CSV or JSON file (all or nothing; the same file again changes nothing)',
  usage,
  async run(argv, context) {
    let parsed: ReturnType<typeof parseArgs<{ options: { tenant: { type: 'string' } }; allowPositionals: true }>>;
    try {
      parsed = parseArgs({ args: argv, options: { tenant: { type: 'string' } }, allowPositionals: true });
    } catch (error) {
      throw new UsageError(`${(error as Error).message}\n\n${usage}`);
    }
    const [file, ...extra] = parsed.positionals;
    if (!file || extra.length > 0) throw new UsageError(usage);
    let content: string;
    try {
      content = await readFile(file, 'utf8');
    } catch (error) {
      throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
    }
    const format = formatOf(file, content);
    const body = format === 'json' ? parseJsonFile(file, content) : content;
    await withDatabase(context, async (url) => {
      const pool = createPool(url, { max: 2, applicationName: 'gantry-cli' });
      try {
        const deps = { pool, outbox: createOutbox({ maxAttempts: context.config.webhooks.maxAttempts }) };
        const tenantId = parsed.values.tenant ?? (await onlyTenant(deps));
        context.print(JSON.stringify(await importFile(deps, tenantId, body, format), null, 2));
      } catch (error) {
        const problems = (error as { problems?: { row: number; field: string; message: string }[] }).problems;
        if (problems)
          for (const problem of problems)
            console.error(`row ${problem.row}${problem.field ? ` ${problem.field}` : ''}: ${problem.message}`);
        throw error;
      } finally {
        await pool.end();
      }
    });
  },
};
