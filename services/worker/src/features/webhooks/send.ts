import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { isPrivateAddress } from '@gantry/contracts';

export type AttemptOutcome = 'success' | 'http_error' | 'timeout' | 'network_error' | 'refused_target';

export interface AttemptResult {
  ok: boolean;
  outcome: AttemptOutcome;
  httpStatus: number | null;
  /** Empty on success; otherwise what went wrong, short and free of secrets. */
  error: string;
  durationMs: number;
}

export interface WebhookRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

export interface SendOptions {
  timeoutMs: number;
  allowPrivateTargets: boolean;
}

/** How much of an error response's body ends up in the delivery log. */
const ERROR_SNIPPET_BYTES = 200;

class RefusedTargetError extends Error {
  readonly code = 'EREFUSEDTARGET';
}

/**
 * dns.lookup that refuses private, loopback and link-local answers, checked when the
 * connection is made: a host that resolved to a public address when the subscription
 * was created cannot later be pointed at the internal network (DNS rebinding).
 */
const publicOnlyLookup: net.LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 4);
    const list = addresses as dns.LookupAddress[];
    const refused = list.find((entry) => isPrivateAddress(entry.address));
    if (refused) {
      return callback(
        new RefusedTargetError(`target ${hostname} resolves to a private address (${refused.address})`),
        '',
        4,
      );
    }
    if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
    const first = list[0];
    if (!first) return callback(new Error(`no address for ${hostname}`), '', 4);
    callback(null, first.address, first.family);
  });
};

function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]+/g, ' ').trim();
}

function describeNetworkError(error: NodeJS.ErrnoException): { outcome: AttemptOutcome; message: string } {
  if (error instanceof RefusedTargetError) return { outcome: 'refused_target', message: error.message };
  switch (error.code) {
    case 'ECONNREFUSED':
      return { outcome: 'network_error', message: 'connection refused' };
    case 'ECONNRESET':
      return { outcome: 'network_error', message: 'connection reset by the receiver' };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { outcome: 'network_error', message: 'host not found' };
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return { outcome: 'network_error', message: 'host unreachable' };
    default:
      return {
        outcome: 'network_error',
        message: printable(`${error.code ? `${error.code}: ` : ''}${error.message}`).slice(0, 300),
      };
  }
}

/**
 * One delivery attempt: POST the exact body, bounded end to end by timeoutMs (connect,
 * TLS, and waiting for the response status). 2xx is success; redirects are not followed.
 * Never throws.
 */
export function sendWebhook(request: WebhookRequest, options: SendOptions): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Omit<AttemptResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: elapsed() });
    };

    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return finish({ ok: false, outcome: 'refused_target', httpStatus: null, error: 'invalid target URL' });
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    // Node skips the lookup for IP literals, so those are checked here.
    if (!options.allowPrivateTargets && net.isIP(host) !== 0 && isPrivateAddress(host)) {
      return finish({
        ok: false,
        outcome: 'refused_target',
        httpStatus: null,
        error: `target ${host} is a private address`,
      });
    }

    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, {
      method: 'POST',
      headers: { ...request.headers, 'Content-Length': String(Buffer.byteLength(request.body)) },
      // A fresh connection per attempt: a reused keep-alive socket the receiver already
      // closed would turn into a spurious failed attempt.
      agent: false,
      ...(options.allowPrivateTargets ? {} : { lookup: publicOnlyLookup }),
    });
    let failedStatus: number | null = null;
    const timer = setTimeout(() => {
      if (failedStatus !== null)
        finish({ ok: false, outcome: 'http_error', httpStatus: failedStatus, error: `HTTP ${failedStatus}` });
      else
        finish({
          ok: false,
          outcome: 'timeout',
          httpStatus: null,
          error: `timed out after ${options.timeoutMs / 1000} s`,
        });
      req.destroy();
    }, options.timeoutMs);

    req.on('error', (error: NodeJS.ErrnoException) => {
      const { outcome, message } = describeNetworkError(error);
      finish({ ok: false, outcome, httpStatus: null, error: message });
    });
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) {
        finish({ ok: true, outcome: 'success', httpStatus: status, error: '' });
        res.destroy();
        return;
      }
      failedStatus = status;
      // Keep the start of the answer: receivers often say there why they refused.
      const chunks: Buffer[] = [];
      let size = 0;
      const fail = () => {
        const snippet = printable(Buffer.concat(chunks).subarray(0, ERROR_SNIPPET_BYTES).toString('utf8'));
        const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
        finish({
          ok: false,
          outcome: 'http_error',
          httpStatus: status,
          error: `HTTP ${status}${redirect}${snippet ? `: ${snippet}` : ''}`,
        });
        res.destroy();
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size >= ERROR_SNIPPET_BYTES) fail();
      });
      res.on('end', fail);
      res.on('error', fail);
    });
    req.end(request.body);
  });
}
