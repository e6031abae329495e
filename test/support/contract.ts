import { ContractMismatchError, ContractValidator, type ObservedResponse } from '../contract/validator.ts';

// The contract check of the whole integration suite: every answer that a test receives
// from an API started by startTestApi is checked against the OpenAPI documents that
// this very server serves. Tests use fetch (directly or through the TestApi helpers),
// so fetch is wrapped once; an answer that does not match fails the test at that call.

const watched = new Map<string, Promise<ContractValidator>>();
const originalFetch = globalThis.fetch;
let installed = false;

/** The validator of a watched server (its documents are fetched once, on first use). */
export function contractOf(serverUrl: string): Promise<ContractValidator> {
  const validator = watched.get(serverUrl);
  if (!validator) throw new Error(`${serverUrl} is not watched`);
  return validator;
}

/** Throws ContractMismatchError when the answer does not match the document. */
export async function assertMatchesContract(serverUrl: string, observed: ObservedResponse): Promise<void> {
  const problems = (await contractOf(serverUrl)).check(observed);
  if (problems.length > 0) throw new ContractMismatchError(problems);
}

async function loadValidator(serverUrl: string, adminToken: string): Promise<ContractValidator> {
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const response = await originalFetch(`${serverUrl}${path}`, { headers });
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}`);
    return response.json();
  };
  return new ContractValidator({
    '/api/external/v1': await get('/api/external/v1/openapi.json'),
    '/api/admin/v1': await get('/api/admin/v1/openapi.json', { Authorization: `Bearer ${adminToken}` }),
  });
}

function requestParts(input: string | URL | Request, init?: RequestInit): { url: string; method: string } {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const method = init?.method ?? (typeof input === 'object' && 'method' in input ? input.method : 'GET');
  return { url, method: method.toUpperCase() };
}

async function checkedFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await originalFetch(input, init);
  const { url, method } = requestParts(input, init);
  const server = [...watched.keys()].find((base) => url.startsWith(`${base}/`));
  if (!server) return response;
  const contentType = response.headers.get('content-type') ?? '';
  const json = /^application\/(.+\+)?json\b/i.test(contentType);
  // Only JSON bodies are read (a copy); other answers are checked for status and type.
  const body = json ? await response.clone().text() : response.body === null ? '' : '(not read)';
  await assertMatchesContract(server, {
    method,
    path: new URL(url).pathname,
    status: response.status,
    contentType,
    body,
    allow: response.headers.get('allow'),
  });
  return response;
}

/**
 * Starts checking every answer of the server at `serverUrl` against its served documents
 * (or against `documents`, by base path, which the harness's own test uses to prove that
 * a mismatch fails).
 */
export function watchContract(serverUrl: string, adminToken: string, documents?: Record<string, unknown>): void {
  const validator = documents
    ? Promise.resolve(new ContractValidator(documents))
    : loadValidator(serverUrl, adminToken);
  validator.catch(() => undefined); // reported on first use
  watched.set(serverUrl, validator);
  if (!installed) {
    globalThis.fetch = checkedFetch;
    installed = true;
  }
}

export function unwatchContract(serverUrl: string): void {
  watched.delete(serverUrl);
}
