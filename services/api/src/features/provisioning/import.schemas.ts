import { z } from 'zod';
import { ErrorResponse } from '../../http/common-schemas.ts';

// One row of an import file: an asset and at most one of its devices. An asset with
// several devices takes several rows that repeat its columns; an asset without a device
// leaves deviceId empty. CSV headers and JSON keys are the same names.

/** PostgreSQL text cannot hold NUL: such a value is a row problem, not a database error. */
const withoutNul = (value: string) => !value.includes('\u0000');
const text = (max: number) => z.string().trim().max(max).refine(withoutNul, 'must not contain NUL characters');
const requiredText = (max: number) => text(max).refine((value) => value.length > 0, 'must not be empty');
/** Empty cells (CSV) and absent keys (JSON) mean the same thing. */
const optionalText = (max: number) =>
  text(max)
    .optional()
    .transform((value) => (value === '' ? undefined : value));

export const ImportRow = z
  .object({
    identifier: requiredText(200).meta({
      description: 'Your own unique id of the machine in the tenant: the key an import matches assets by',
    }),
    name: requiredText(200).meta({ description: 'Name of the machine' }),
    assetType: optionalText(200).meta({ description: 'Name of its asset type (created when the tenant has none)' }),
    customerName: optionalText(200).meta({ description: 'The customer the machine works for' }),
    displayCode: optionalText(100).meta({ description: 'Short code shown in lists (default: identifier)' }),
    location: optionalText(500).meta({ description: 'Where the machine works (free text)' }),
    externalRef: optionalText(200).meta({ description: 'Id of the machine in another system of yours' }),
    deviceId: z
      .string()
      .trim()
      .regex(/^([A-Za-z0-9._:-]{1,64})?$/, 'must be 1–64 letters, digits or . _ : -')
      .optional()
      .transform((value) => (value === '' ? undefined : value))
      .meta({ description: 'The id a device of this machine publishes under; the key devices are matched by' }),
    deviceName: optionalText(200).meta({ description: 'Name shown for the device' }),
    enabled: z
      .union([z.boolean(), z.enum(['true', 'false', ''])])
      .optional()
      .transform((value) => (value === '' || value === undefined ? undefined : value === true || value === 'true'))
      .meta({ description: 'false: the device is registered but its messages are not used (default true)' }),
  })
  .strict()
  .meta({ id: 'AdminImportRow' });

export const ImportJson = z
  .object({ rows: z.array(ImportRow).meta({ description: 'The rows, in file order' }) })
  .meta({ id: 'AdminImportFile' });

const ImportCounts = z.object({
  created: z.number().int(),
  updated: z.number().int(),
  unchanged: z.number().int(),
});

export const ImportResult = z
  .object({
    rows: z.number().int().meta({ description: 'Rows read from the file' }),
    assetTypes: z.object({ created: z.number().int() }),
    assets: ImportCounts,
    devices: ImportCounts,
  })
  .meta({ id: 'AdminImportResult' });

export const ImportProblem = z
  .object({
    row: z.number().int().meta({ description: 'Row number in the file: 1 is the first data row (after a CSV header)' }),
    field: z.string().meta({ description: 'The column or key at fault (empty when the row as a whole is)' }),
    message: z.string(),
  })
  .meta({ id: 'AdminImportProblem' });

export const ImportRejected = ErrorResponse.extend({
  problems: z.array(ImportProblem).meta({ description: 'Every row at fault (at most 1,000), in file order' }),
}).meta({ id: 'AdminImportRejected' });

export type ImportRow = z.output<typeof ImportRow>;
export type ImportResult = z.infer<typeof ImportResult>;
export type ImportProblem = z.infer<typeof ImportProblem>;
