import type { z } from 'zod';
import {
  deviceTimestampSchema,
  parseRfc3339,
  readingPayloadSchemas,
  type Reading,
  type ReadingType,
} from '@gantry/contracts';

/**
 * The hot path of validation. zod's safeParse of a reading cost more than the rest of
 * the parse steps together (and allocated as much), for payloads that are nearly always
 * valid. Each reading type's checks are compiled once from its zod schema (ranges,
 * integer formats, enums, optionals, defaults: read from the schema, not written down a
 * second time); a payload that passes them is what zod would return, field for field. A
 * payload that fails any of them is parsed by zod after all, so every rejection keeps
 * zod's issue, reason and detail. Whatever the compiler does not recognise (a refine, a
 * field kind it does not know) is checked by that field's own zod schema, and an object
 * schema with checks of its own or unknown-key handling other than stripping gets no fast
 * path at all.
 */

/** Not valid on the fast path (zod decides). A symbol, so a check returns its value without wrapping it in an object per field. */
const INVALID: unique symbol = Symbol('invalid');
type FieldCheck = (value: unknown) => unknown;

interface ZodDef {
  type: string;
  checks?: Array<{ _zod: { def: { check: string; value?: unknown; inclusive?: boolean; format?: string } } }>;
  innerType?: z.ZodType;
  defaultValue?: unknown;
  entries?: Record<string, unknown>;
  catchall?: unknown;
  shape?: Record<string, z.ZodType>;
}

const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: ZodDef } })._zod.def;

const MAX_DEVICE_TS = 253_402_300_799_999;

/** deviceTimestampSchema's transform: RFC 3339 or epoch milliseconds, to epoch milliseconds. */
function checkTimestamp(value: unknown): unknown {
  let ms: number;
  if (typeof value === 'number') ms = Number.isFinite(value) ? Math.trunc(value) : Number.NaN;
  else if (typeof value === 'string') ms = parseRfc3339(value);
  else return INVALID;
  if (Number.isNaN(ms) || ms < 0 || ms > MAX_DEVICE_TS) return INVALID;
  return ms;
}

/** Bounds and integer format of a plain number schema, or null when it has other checks. */
function numberCheck(def: ZodDef): FieldCheck | null {
  let min = Number.NEGATIVE_INFINITY;
  let max = Number.POSITIVE_INFINITY;
  let minInclusive = true;
  let maxInclusive = true;
  let safeInt = false;
  for (const check of def.checks ?? []) {
    const c = check._zod.def;
    if (c.check === 'greater_than' && typeof c.value === 'number') {
      min = c.value;
      minInclusive = c.inclusive === true;
    } else if (c.check === 'less_than' && typeof c.value === 'number') {
      max = c.value;
      maxInclusive = c.inclusive === true;
    } else if (c.check === 'number_format' && c.format === 'safeint') safeInt = true;
    else return null;
  }
  return (value) => {
    if (typeof value !== 'number' || !Number.isFinite(value)) return INVALID;
    if (safeInt && !Number.isSafeInteger(value)) return INVALID;
    if (minInclusive ? value < min : value <= min) return INVALID;
    if (maxInclusive ? value > max : value >= max) return INVALID;
    return value;
  };
}

/** The check of one field, compiled from its schema; a field's own zod parse where not recognised. */
function compileField(schema: z.ZodType): FieldCheck {
  if (schema === (deviceTimestampSchema as unknown as z.ZodType)) return checkTimestamp;
  const def = defOf(schema);
  const checks = def.checks ?? [];
  if (def.type === 'optional' && def.innerType) {
    const inner = compileField(def.innerType);
    return (value) => (value === undefined ? undefined : inner(value));
  }
  if (def.type === 'default' && def.innerType) {
    const inner = compileField(def.innerType);
    const fallback = def.defaultValue;
    return (value) => (value === undefined ? fallback : inner(value));
  }
  if (def.type === 'boolean' && checks.length === 0) return (value) => (typeof value === 'boolean' ? value : INVALID);
  if (def.type === 'enum' && checks.length === 0 && def.entries) {
    const allowed = new Set(Object.values(def.entries));
    return (value) => (typeof value === 'string' && allowed.has(value) ? value : INVALID);
  }
  if (def.type === 'number') {
    const check = numberCheck(def);
    if (check) return check;
  }
  return (value) => {
    const parsed = schema.safeParse(value);
    return parsed.success ? parsed.data : INVALID;
  };
}

type FastValidator = (payload: Record<string, unknown>) => Reading | undefined;

/** The fast path of one reading type, or null where its object schema is not a plain stripping object. */
function compileReading(type: ReadingType, schema: z.ZodType): FastValidator | null {
  const def = defOf(schema);
  if (def.type !== 'object' || !def.shape || def.catchall !== undefined || (def.checks ?? []).length > 0) return null;
  const fields = Object.entries(def.shape).map(([name, field]) => ({ name, check: compileField(field) }));
  return (payload) => {
    const reading: Record<string, unknown> = { type };
    for (const field of fields) {
      const value = field.check(payload[field.name]);
      if (value === INVALID) return undefined;
      // zod leaves an absent optional key out of its output.
      if (value !== undefined) reading[field.name] = value;
    }
    return reading as Reading;
  };
}

const fastValidators = new Map<ReadingType, FastValidator>();
for (const [type, schema] of Object.entries(readingPayloadSchemas) as Array<[ReadingType, z.ZodType]>) {
  const validator = compileReading(type, schema);
  if (validator) fastValidators.set(type, validator);
}

/** The reading zod would return for this payload, when it passes the compiled checks; undefined to ask zod. */
export function fastReading(type: ReadingType, payload: Record<string, unknown>): Reading | undefined {
  return fastValidators.get(type)?.(payload);
}
