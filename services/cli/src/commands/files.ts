import { parseArgs } from 'node:util';
import { migrateFilesToDatabase } from '@gantry/api';
import { createPool } from '@gantry/db';
import { type Command, UsageError } from '../command.ts';
import { withDatabase } from '../with-database.ts';

const MiB = 1024 * 1024;

export const filesCommand: Command = {
  name: 'files',
  summary: 'Move service request files from the data directory’s disk into the database (`gantry files migrate`)',
  usage:
    'gantry files migrate\n\n' +
    '  Copies every service request file under <GANTRY_DATA_DIR>/files into the database and\n' +
    '  verifies each copy (size and SHA-256 read back). Files already moved are skipped, so it\n' +
    '  is safe to run again. Disk files stay where they are; remove <GANTRY_DATA_DIR>/files once\n' +
    '  every API instance runs with GANTRY_FILE_STORAGE=database (or auto with a database).',
  async run(argv, context) {
    let positionals: string[];
    try {
      positionals = parseArgs({ args: argv, options: {}, allowPositionals: true, strict: true }).positionals;
    } catch (error) {
      throw new UsageError(`${(error as Error).message}\n\n${this.usage}`);
    }
    if (positionals.length !== 1 || positionals[0] !== 'migrate') throw new UsageError(this.usage);
    const { config, print } = context;
    await withDatabase(context, async (url) => {
      const pool = createPool(url, { max: 2, applicationName: 'gantry-files' });
      try {
        const summary = await migrateFilesToDatabase(pool, config.dataDir, (key, outcome) => {
          if (outcome === 'missing') print(`missing on disk: ${key}`);
          if (outcome === 'mismatched') print(`copy did not verify, not moved: ${key}`);
        });
        print(`files:          ${summary.files}`);
        print(`moved:          ${summary.moved} (${(summary.bytesMoved / MiB).toFixed(1)} MiB)`);
        print(`already moved:  ${summary.alreadyMoved}`);
        print(`missing:        ${summary.missing.length}`);
        print(`not verified:   ${summary.mismatched.length}`);
        if (config.fileStorage === 'disk')
          print(
            'note: GANTRY_FILE_STORAGE resolves to disk here; the API reads the database copies with GANTRY_FILE_STORAGE=database',
          );
        if (summary.mismatched.length > 0)
          throw new Error(`${summary.mismatched.length} files did not verify and stay on disk only (listed above)`);
      } finally {
        await pool.end();
      }
    });
  },
};
