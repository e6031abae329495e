import { fromSchema } from '@openapi-contrib/openapi-schema-to-json-schema';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

// Checks real answers against the served OpenAPI 3.0.3 documents (not the zod schemas
// they come from): each document's schemas are converted to JSON Schema by a maintained
// converter that reads OpenAPI's own keywords as 3.0.3 defines them (`nullable` widens
// only a `type` beside it), then compiled with ajv. Objects are closed: a field the
// document does not name is a mismatch, so the document says everything that is sent.

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

export interface ObservedResponse {
  method: string;
  /** Path from the server root, with or without the query string. */
  path: string;
  status: number;
  contentType: string;
  /** The body as received (text); ignored unless the content type is JSON. */
  body: string;
  /** Value of the Allow header, when there is one. */
  allow?: string | null;
}

interface Operation {
  operationId: string;
  responses: Record<string, Json>;
}

interface Base {
  prefix: string;
  document: Json;
  /** Path templates of the document, literal ones first, as regular expressions. */
  paths: { template: string; pattern: RegExp; item: Record<string, Operation> }[];
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function templatePattern(template: string): RegExp {
  const escaped = template
    .split(/(\{[^}]+\})/)
    .map((part) => (/^\{[^}]+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${escaped === '/' ? '/?' : escaped}$`);
}

/** Rewrites local `#/components/...` references to the shared schema id of the base. */
function rebase(value: Json, id: string): Json {
  if (Array.isArray(value)) return value.map((item) => rebase(item, id));
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] =
      key === '$ref' && typeof inner === 'string' && inner.startsWith('#/') ? `${id}${inner}` : rebase(inner, id);
  }
  return out;
}

/** OpenAPI schema → JSON Schema (draft-07 flavoured for ajv), objects closed unless they say otherwise. */
function toJsonSchema(schema: Json, closeObjects: boolean): Json {
  const converted = fromSchema(schema, { cloneSchema: true }) as Json;
  delete converted.$schema;
  const close = (node: Json): void => {
    if (Array.isArray(node)) {
      node.forEach(close);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    if (node.properties && node.additionalProperties === undefined) node.additionalProperties = false;
    Object.values(node).forEach(close);
  };
  if (closeObjects) close(converted);
  return converted;
}

export class ContractValidator {
  private readonly ajv: Ajv;
  private readonly bases: Base[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly closeObjects: boolean;

  /** `documents` maps a base path (`/api/external/v1`) to the OpenAPI document served there. */
  constructor(documents: Record<string, Json>, options: { closeObjects?: boolean } = {}) {
    const closeObjects = options.closeObjects ?? true;
    this.ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
    addFormats.default(this.ajv);
    this.ajv.addFormat('binary', true);
    for (const [prefix, document] of Object.entries(documents)) {
      const id = `openapi:${prefix}`;
      const schemas: Record<string, Json> = {};
      for (const [name, schema] of Object.entries<Json>(document.components?.schemas ?? {}))
        schemas[name] = rebase(toJsonSchema(schema, closeObjects), id);
      this.ajv.addSchema({ $id: id, components: { schemas } });
      const paths = Object.entries<Json>(document.paths ?? {})
        .map(([template, item]) => ({ template, pattern: templatePattern(template), item }))
        // Literal paths win over templated ones (/reporting/export.csv before /reporting/{x}).
        .sort((a, b) => (a.template.match(/\{/g)?.length ?? 0) - (b.template.match(/\{/g)?.length ?? 0));
      this.bases.push({ prefix, document, paths });
    }
    // The longest prefix first.
    this.bases.sort((a, b) => b.prefix.length - a.prefix.length);
    this.closeObjects = closeObjects;
  }

  private validatorFor(key: string, base: Base, schema: Json): ValidateFunction {
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(rebase(toJsonSchema(schema, this.closeObjects), `openapi:${base.prefix}`));
      this.compiled.set(key, validate);
    }
    return validate;
  }

  /** What is wrong with one answer, by the document of its base; [] when it matches. */
  check(observed: ObservedResponse): string[] {
    const path = observed.path.split('?')[0]!;
    const base = this.bases.find((b) => path === b.prefix || path.startsWith(`${b.prefix}/`));
    if (!base) return []; // the server root (health, metrics): no document describes it
    const relative = path.slice(base.prefix.length) || '/';
    const method = observed.method.toLowerCase();
    const label = `${observed.method} ${path} → ${observed.status}`;
    const json = /^application\/(.+\+)?json\b/i.test(observed.contentType);

    const matched = base.paths.find((candidate) => candidate.pattern.test(relative));
    if (!matched) {
      // No such path in the document: an error is still the documented error shape, and
      // data (JSON) is never served from an undocumented path. Hidden routes serve only
      // the static files of the HTML pages.
      if (observed.status < 400) return json ? [`${label}: JSON from a path that is not in the document`] : [];
      return json ? this.validateBody(base, `${base.prefix}:error`, this.errorSchema(base), observed, label) : [];
    }
    const operation =
      matched.item[method] ?? (method === 'head' ? matched.item.get : undefined) ?? this.anyOperation(matched.item);
    if (!operation) return [`${label}: the document has no operation on ${matched.template}`];
    if (!matched.item[method] && !(method === 'head' && matched.item.get) && method !== 'options') {
      // A method the path does not have: the document promises a 405 with Allow.
      if (observed.status !== 405)
        return [`${label}: ${observed.method} is not in the document for ${matched.template}`];
      if (!observed.allow) return [`${label}: a 405 without Allow`];
    }
    if (method === 'options' && observed.status < 300) return [];
    const response = operation.responses[String(observed.status)] ?? operation.responses.default;
    if (!response) return [`${label}: ${operation.operationId} does not document status ${observed.status}`];
    const content: Record<string, Json> = response.content ?? {};
    if (method === 'head' || observed.status === 204 || observed.body === '') {
      return Object.keys(content).length === 0 || method === 'head' || observed.body !== ''
        ? []
        : [`${label}: an empty body where ${operation.operationId} documents ${Object.keys(content).join(', ')}`];
    }
    const mediaType = observed.contentType.split(';')[0]!.trim().toLowerCase();
    const documented =
      content[mediaType] ??
      Object.entries(content).find(
        ([type]) => type === '*/*' || (type.endsWith('/*') && mediaType.startsWith(type.slice(0, -1))),
      )?.[1];
    if (!documented)
      return [
        `${label}: content type ${mediaType || '(none)'} is not documented for ${operation.operationId} ${observed.status} (${Object.keys(content).join(', ') || 'no body'})`,
      ];
    if (!json || !documented.schema) return [];
    return this.validateBody(
      base,
      `${operation.operationId}:${observed.status}:${mediaType}`,
      documented.schema,
      observed,
      label,
    );
  }

  private anyOperation(item: Record<string, Operation>): Operation | undefined {
    return METHODS.map((method) => item[method]).find(Boolean);
  }

  private errorSchema(base: Base): Json {
    return base.document.components?.schemas?.ErrorResponse
      ? { $ref: '#/components/schemas/ErrorResponse' }
      : { type: 'object', required: ['error'], properties: { error: { type: 'string' } } };
  }

  private validateBody(base: Base, key: string, schema: Json, observed: ObservedResponse, label: string): string[] {
    let body: unknown;
    try {
      body = JSON.parse(observed.body);
    } catch {
      return [`${label}: the body is not JSON: ${observed.body.slice(0, 120)}`];
    }
    const validate = this.validatorFor(key, base, schema);
    if (validate(body)) return [];
    return (validate.errors ?? []).slice(0, 8).map((error) => {
      const at = error.instancePath || '(body)';
      const detail = error.params && Object.keys(error.params).length > 0 ? ` ${JSON.stringify(error.params)}` : '';
      return `${label}: ${at} ${error.message}${detail}`;
    });
  }
}

/** Thrown by the test harness when an answer does not match the served document. */
export class ContractMismatchError extends Error {
  constructor(readonly problems: string[]) {
    super(`the answer does not match the served OpenAPI document:\n  ${problems.join('\n  ')}`);
    this.name = 'ContractMismatchError';
  }
}
