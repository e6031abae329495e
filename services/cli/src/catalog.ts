import type { Command } from './command.ts';

export interface CatalogEntry {
  name: string;
  summary: string;
  /** Imports the command's module: only the command invoked is loaded, so `--help` loads none. */
  load(): Promise<Command>;
}

const admin = (verb: string) => () =>
  import('./commands/admin.ts').then(({ adminCommands }) => adminCommands.find((command) => command.name === verb)!);

// Summaries are written here rather than read from the modules, which would load them all;
// catalog.test.ts checks they match each command's own.
export const catalog: CatalogEntry[] = [
  {
    name: 'start',
    summary: 'Run api + ingest + worker in one process (embedded PostgreSQL and MQTT broker when none is configured)',
    load: () => import('./commands/start.ts').then((module) => module.startCommand),
  },
  {
    name: 'migrate',
    summary: 'Apply database migrations (safe to run twice, or from two processes at once)',
    load: () => import('./commands/migrate.ts').then((module) => module.migrateCommand),
  },
  {
    name: 'status',
    summary:
      'Show the ports of the running `gantry start`, and the storage mode, migrations and gold coverage of the database',
    load: () => import('./commands/status.ts').then((module) => module.statusCommand),
  },
  {
    name: 'database-url',
    summary:
      'Print the database URL with its password (GANTRY_DATABASE_URL, or the embedded PostgreSQL of the data dir)',
    load: () => import('./commands/database-url.ts').then((module) => module.databaseUrlCommand),
  },
  {
    name: 'demo',
    summary: 'Provision the demo tenant (or new keys for it) and print a tenant key and a customer key',
    load: () => import('./commands/demo.ts').then((module) => module.demoCommand),
  },
  {
    name: 'replay',
    summary: 'Re-parse bronze messages into silver (after a parser fix, or once an unknown device is registered)',
    load: () => import('./commands/replay.ts').then((module) => module.replayCommand),
  },
  {
    name: 'unknown-devices',
    summary: 'List device ids seen on the broker that no tenant has registered (first/last seen, messages, a sample)',
    load: () => import('./commands/unknown-devices.ts').then((module) => module.unknownDevicesCommand),
  },
  {
    name: 'register',
    summary: 'Register a device from `gantry unknown-devices` onto an asset (optionally re-parse what it sent before)',
    load: () => import('./commands/unknown-devices.ts').then((module) => module.registerCommand),
  },
  {
    name: 'files',
    summary: 'Move service request files from the data directory’s disk into the database (`gantry files migrate`)',
    load: () => import('./commands/files.ts').then((module) => module.filesCommand),
  },
  {
    name: 'import',
    summary:
      'Import assets and their devices from a CSV or JSON file (all or nothing; the same file again changes nothing)',
    load: () => import('./commands/import.ts').then((module) => module.importCommand),
  },
  {
    name: 'create',
    summary:
      'Create back-office objects: tenant, api-key, asset-type, asset, template, inspection, report, device, operator, geofence',
    load: admin('create'),
  },
  { name: 'list', summary: 'List back-office objects: tenants, api-keys', load: admin('list') },
  { name: 'update', summary: 'Update back-office objects: device, geofence', load: admin('update') },
  { name: 'disable', summary: 'Disable back-office objects: api-key', load: admin('disable') },
  { name: 'delete', summary: 'Delete back-office objects: geofence', load: admin('delete') },
];
