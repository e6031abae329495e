import { parseArgs } from 'node:util';
import { z } from 'zod';
import { createOutbox, createPool } from '@gantry/db';
import { provisioning, provisioningSchemas as schemas } from '@gantry/api';
import { UsageError, type Command } from '../command.ts';
import { withDatabase } from '../with-database.ts';

type Deps = provisioning.ProvisioningDeps;

interface Operation {
  schema?: z.ZodType;
  needsTenant: boolean;
  needsId?: boolean;
  run(deps: Deps, tenantId: string, id: string, body: never): Promise<unknown>;
}

// The same provisioning code and body schemas as the admin API (docs/getting-started.md).
const operations: Record<string, Operation> = {
  'create tenant': {
    schema: schemas.TenantCreate,
    needsTenant: false,
    run: (d, _t, _i, b) => provisioning.createTenant(d, b),
  },
  'list tenants': { needsTenant: false, run: (d) => provisioning.listTenants(d) },
  'create api-key': {
    schema: schemas.ApiKeyCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createApiKey(d, t, b),
  },
  'list api-keys': { needsTenant: true, run: (d, t) => provisioning.listApiKeys(d, t) },
  'disable api-key': { needsTenant: true, needsId: true, run: (d, t, i) => provisioning.disableApiKey(d, t, i) },
  'create asset-type': {
    schema: schemas.AssetTypeCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createAssetType(d, t, b),
  },
  'create asset': {
    schema: schemas.AssetCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createAsset(d, t, b),
  },
  'create template': {
    schema: schemas.TemplateCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createTemplate(d, t, b),
  },
  'create inspection': {
    schema: schemas.InspectionCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createInspection(d, t, b),
  },
  'create report': {
    schema: schemas.ReportCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createReport(d, t, b),
  },
  'create device': {
    schema: schemas.DeviceCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createDevice(d, t, b),
  },
  'update device': {
    schema: schemas.DeviceUpdate,
    needsTenant: true,
    needsId: true,
    run: (d, t, i, b) => provisioning.updateDevice(d, t, i, b),
  },
  'create operator': {
    schema: schemas.OperatorCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createOperator(d, t, b),
  },
  'create geofence': {
    schema: schemas.GeofenceCreate,
    needsTenant: true,
    run: (d, t, _i, b) => provisioning.createGeofence(d, t, b),
  },
  'update geofence': {
    schema: schemas.GeofenceUpdate,
    needsTenant: true,
    needsId: true,
    run: (d, t, i, b) => provisioning.updateGeofence(d, t, i, b),
  },
  'delete geofence': { needsTenant: true, needsId: true, run: (d, t, i) => provisioning.deleteGeofence(d, t, i) },
};

interface JsonSchemaField {
  type?: string;
  format?: string;
  enum?: unknown[];
  description?: string;
}

/** The body fields of an operation, one line each: name, type, required or not, meaning. */
export function fieldLines(schema: z.ZodType): string[] {
  type ObjectSchema = { properties?: Record<string, JsonSchemaField>; required?: string[] };
  const document = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as ObjectSchema & {
    $ref?: string;
    $defs?: Record<string, ObjectSchema>;
  };
  // A schema with a meta id comes back as a reference to its definition.
  const json = document.$ref ? (document.$defs?.[document.$ref.split('/').pop() ?? ''] ?? {}) : document;
  const fields = Object.entries(json.properties ?? {});
  const width = Math.max(...fields.map(([name]) => name.length));
  return fields.map(([name, field]) => {
    const type = field.enum ? field.enum.map(String).join('|') : (field.format ?? field.type ?? 'JSON');
    const required = json.required?.includes(name) ? 'required' : 'optional';
    return `  ${name.padEnd(width)}  ${`${type}, ${required}`.padEnd(26)}  ${field.description ?? ''}`.trimEnd();
  });
}

/** One field of an answer, for scripts (`--get id`): strings bare, anything else as JSON. */
function fieldOf(result: unknown, name: string): string {
  const value = (result as Record<string, unknown> | null)?.[name];
  if (value === undefined) throw new UsageError(`--get ${name}: the answer has no field "${name}"`);
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function adminCommand(verb: string): Command {
  const names = Object.keys(operations)
    .filter((key) => key.startsWith(`${verb} `))
    .map((key) => key.slice(verb.length + 1));
  return {
    name: verb,
    summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} back-office objects: ${names.join(', ')}`,
    usage: `gantry ${verb} <${names.join('|')}> [id] [--tenant <tenantId>] [--json '<body with the external API field names>'] [--get <field>]`,
    help(argv) {
      const resource = argv.find((arg) => !arg.startsWith('-'));
      const operation = resource === undefined ? undefined : operations[`${verb} ${resource}`];
      if (!operation)
        return `${this.usage}\n\n${this.summary}\n\n\`gantry ${verb} <kind> --help\` lists the fields of that kind.`;
      const lines = [
        `gantry ${verb} ${resource}${operation.needsId ? ' <id>' : ''}${operation.needsTenant ? ' --tenant <tenantId>' : ''}${operation.schema ? " --json '{…}'" : ''}`,
      ];
      if (operation.schema)
        lines.push('', 'Fields of --json (the admin API takes the same body):', ...fieldLines(operation.schema));
      lines.push('', 'The answer is printed as JSON; --get <field> prints one field of it (e.g. --get id).');
      return lines.join('\n');
    },
    async run(argv, context) {
      const { config, print } = context;
      const { positionals, values } = parseArgs({
        args: argv,
        allowPositionals: true,
        options: { tenant: { type: 'string' }, json: { type: 'string' }, get: { type: 'string' } },
      });
      const [resource, id] = positionals;
      const operation = operations[`${verb} ${resource}`];
      if (!resource || !operation)
        throw new UsageError(`unknown resource "${resource ?? ''}"; one of: ${names.join(', ')}`);
      if (operation.needsTenant && !values.tenant) throw new UsageError('--tenant <tenantId> is required');
      if (operation.needsId && !id) throw new UsageError(`the id of the ${resource} is required`);
      let body: unknown;
      if (operation.schema) {
        let raw: unknown;
        try {
          raw = JSON.parse(values.json ?? '{}');
        } catch {
          throw new UsageError('--json is not valid JSON');
        }
        const parsed = operation.schema.safeParse(raw);
        if (!parsed.success) {
          throw new UsageError(
            parsed.error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; '),
          );
        }
        body = parsed.data;
      }
      await withDatabase(context, async (url) => {
        const pool = createPool(url, { max: 2, applicationName: 'gantry-cli' });
        try {
          const result = await operation.run(
            { pool, outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }) },
            values.tenant ?? '',
            id ?? '',
            body as never,
          );
          if (values.get === undefined) print(JSON.stringify(result, null, 2));
          else print(fieldOf(result, values.get));
        } finally {
          await pool.end();
        }
      });
    },
  };
}

export const adminCommands: Command[] = ['create', 'list', 'update', 'disable', 'delete'].map(adminCommand);
