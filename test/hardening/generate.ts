import { z } from 'zod';
import { pick } from './support.ts';

// Values generated from the JSON Schema of a route's own zod schemas (z.toJSONSchema,
// input side): valid ones so requests reach the handlers, malformed ones to probe the
// validation. Everything draws from one seeded PRNG, so a run is reproducible.

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JsonSchema = Record<string, any>;

const converted = new WeakMap<z.ZodType, JsonSchema>();

export function inputJsonSchema(schema: z.ZodType): JsonSchema {
  let json = converted.get(schema);
  if (!json) {
    json = z.toJSONSchema(schema, {
      io: 'input',
      unrepresentable: 'any',
      reused: 'inline',
      cycles: 'ref',
    }) as JsonSchema;
    converted.set(schema, json);
  }
  return json;
}

/** Strings that have broken parsers, SQL builders and date handling somewhere. */
export const NASTY_STRINGS = [
  '',
  ' ',
  'abc',
  '-1',
  '0',
  '1.5',
  '1e309',
  'NaN',
  'Infinity',
  '-Infinity',
  '99999999999999999999999999',
  '-9223372036854775809',
  'true',
  'null',
  'undefined',
  '[]',
  '{}',
  '{"$ne":null}',
  '{"__proto__":{"admin":true}}',
  "' OR '1'='1",
  '1; DROP TABLE assets; --',
  "x' UNION SELECT key_hash FROM api_keys --",
  '%',
  '_',
  '\\',
  '\u0000',
  'nul\u0000byte',
  '\ud800',
  '😀'.repeat(40),
  'a'.repeat(5000),
  '2026-02-30',
  '2026-13-01',
  '2026-00-10',
  '0000-01-01',
  '10000-01-01',
  '1969-12-31',
  '2026-01-01T25:00:00Z',
  '2026-01-01T10:00:00+99:99',
  '2026-01-01T10:00:00',
  '9999-12-31T23:59:59.999999999Z',
  '2026-11-01T00:00:00Z/2026-12-01',
  'not-a-uuid',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '6f1c0b8e-3f2a-4c4e-9d4b-zzzzzzzzzzzz',
  '<script>alert(1)</script>',
  '../../etc/passwd',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a log-injection probe, sent as literal text
  '${jndi:ldap://127.0.0.1/x}',
  'fleet',
  'asset',
  'hour',
  'day',
  'open',
];

/** JSON values of every type and some extremes. */
export const NASTY_JSON: unknown[] = [
  null,
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  // biome-ignore lint/correctness/noPrecisionLoss: a number just past 2^53 is the point of the probe
  9007199254740993,
  true,
  false,
  '',
  'x',
  'a'.repeat(20_000),
  [],
  [null],
  {},
  { $ne: null },
  JSON.parse('{"__proto__":{"polluted":true}}'),
  { constructor: { prototype: { polluted: true } } },
  "'; DROP TABLE service_requests; --",
  '\u0000',
  '2026-02-30',
  'not-a-uuid',
  nested(200),
];

function nested(depth: number): unknown {
  let value: unknown = 'deep';
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

const VALID_DATES = [
  '2026-11-01',
  '2026-10-15',
  '2026-11-20T06:00:00Z',
  '2026-11-21T23:30:00.000Z',
  '2026-11-18T08:00:00+02:00',
];

export interface GeneratorPools {
  /** Identifiers of seeded objects, so path and body uuids sometimes hit real rows. */
  uuids: string[];
}

export class ValueGenerator {
  constructor(
    private readonly random: () => number,
    private readonly pools: GeneratorPools,
  ) {}

  private chance(p: number): boolean {
    return this.random() < p;
  }

  private resolve(schema: JsonSchema, root: JsonSchema): JsonSchema {
    let current = schema;
    for (let hops = 0; current && typeof current.$ref === 'string' && hops < 10; hops++) {
      const name = current.$ref.replace(/^#\/(\$defs|definitions)\//, '');
      current = current.$ref === '#' ? root : (root.$defs?.[name] ?? root.definitions?.[name] ?? {});
    }
    return current ?? {};
  }

  uuid(): string {
    if (this.pools.uuids.length > 0 && this.chance(0.8)) return pick(this.random, this.pools.uuids);
    const hex = () => Math.floor(this.random() * 16).toString(16);
    const part = (n: number) => Array.from({ length: n }, hex).join('');
    return `${part(8)}-${part(4)}-4${part(3)}-a${part(3)}-${part(12)}`;
  }

  /** A value meant to pass the schema (best effort: refinements are not visible here). */
  valid(input: JsonSchema, root: JsonSchema, name = '', depth = 0): unknown {
    const schema = this.resolve(input, root);
    if (depth > 6) return null;
    if ('const' in schema) return schema.const;
    if (Array.isArray(schema.enum)) return pick(this.random, schema.enum);
    const variants: JsonSchema[] | undefined = schema.anyOf ?? schema.oneOf;
    if (variants) {
      const nonNull = variants.filter((variant) => this.resolve(variant, root).type !== 'null');
      return this.valid(pick(this.random, nonNull.length > 0 ? nonNull : variants), root, name, depth + 1);
    }
    if (Array.isArray(schema.allOf) && schema.allOf.length > 0)
      return this.valid(schema.allOf[0], root, name, depth + 1);
    if (schema.example !== undefined && this.chance(0.5)) return schema.example;
    if (Array.isArray(schema.examples) && schema.examples.length > 0 && this.chance(0.5))
      return pick(this.random, schema.examples);
    if (schema.default !== undefined && this.chance(0.3)) return schema.default;
    const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
    switch (type) {
      case 'string':
        return this.validString(schema, name);
      case 'integer':
      case 'number': {
        const min =
          typeof schema.minimum === 'number'
            ? schema.minimum
            : typeof schema.exclusiveMinimum === 'number'
              ? schema.exclusiveMinimum + 1
              : 0;
        const max =
          typeof schema.maximum === 'number'
            ? schema.maximum
            : typeof schema.exclusiveMaximum === 'number'
              ? schema.exclusiveMaximum - 1
              : min + 100;
        const span = Math.min(max - min, 1000);
        const value = min + this.random() * span;
        return type === 'integer' ? Math.round(value) : Math.round(value * 100) / 100;
      }
      case 'boolean':
        return this.chance(0.5);
      case 'array': {
        const min = schema.minItems ?? 0;
        const count = Math.min(schema.maxItems ?? 3, min + Math.floor(this.random() * 3));
        return Array.from({ length: count }, () => this.valid(schema.items ?? {}, root, name, depth + 1));
      }
      case 'object': {
        const result: Record<string, unknown> = {};
        const required = new Set<string>(schema.required ?? []);
        for (const [key, property] of Object.entries<JsonSchema>(schema.properties ?? {})) {
          if (required.has(key) || this.chance(0.5)) result[key] = this.valid(property, root, key, depth + 1);
        }
        return result;
      }
      case 'null':
        return null;
      default:
        return 'x';
    }
  }

  private validString(schema: JsonSchema, name: string): string {
    const format: string | undefined = schema.format;
    if (format === 'uuid' || /(^id$|Id$)/.test(name)) return this.uuid();
    if (format === 'date-time' || /^(from|to)$|At$/.test(name))
      return pick(
        this.random,
        VALID_DATES.filter((d) => format !== 'date-time' || d.includes('T')),
      );
    if (format === 'date') return '2026-11-01';
    if (format === 'email' || /email/i.test(name)) return 'fuzz@example.com';
    if (format === 'uri' || format === 'url' || /url$/i.test(name)) return 'http://127.0.0.1:9/hook';
    const min = schema.minLength ?? 1;
    const max = schema.maxLength ?? 40;
    const base = `fuzz-${name || 'value'}-${Math.floor(this.random() * 1000)}`;
    return base.length > max ? base.slice(0, max) : base.padEnd(min, 'x');
  }

  /** A malformed value for a query string or path segment. */
  nastyString(): string {
    return pick(this.random, NASTY_STRINGS);
  }

  /** A malformed JSON value for a body field. */
  nastyJson(): unknown {
    return pick(this.random, NASTY_JSON);
  }
}
