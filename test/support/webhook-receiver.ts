import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the receiver got it: raw body bytes and lower-cased headers. */
export interface ReceivedWebhook {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  json: any;
  /** The status answered; null while the request is held ('hang'). */
  answeredStatus: number | null;
}

/** What the receiver does with a request: answer a status, or hold it without answering. */
export type ReceiverBehaviour = { status: number; body?: string } | 'hang';

export interface WebhookReceiver {
  url: string;
  requests: ReceivedWebhook[];
  /** Decides the answer to each request (default: 200). */
  respond(behaviour: (request: ReceivedWebhook, index: number) => ReceiverBehaviour): void;
  /** Requests currently held without an answer. */
  held(): number;
  /** Answers every held request with this status. */
  release(status?: number): void;
  /** Resolves once predicate(requests) holds (checked on every request and closed held request); rejects with `what` after waitMs. */
  waitFor(what: string, predicate: (requests: ReceivedWebhook[]) => boolean, waitMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** A real HTTP server on a free loopback port that records every webhook it receives. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const requests: ReceivedWebhook[] = [];
  const holding = new Map<http.ServerResponse, ReceivedWebhook>();
  const listeners = new Set<() => void>();
  let behaviour: (request: ReceivedWebhook, index: number) => ReceiverBehaviour = () => ({ status: 200 });

  const notify = () => {
    for (const listener of [...listeners]) listener();
  };
  const answer = (res: http.ServerResponse, record: ReceivedWebhook, status: number, body = '') => {
    record.answeredStatus = status;
    res.writeHead(status, { 'Content-Type': 'text/plain' }).end(body);
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        parsed = undefined;
      }
      const record: ReceivedWebhook = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        json: parsed,
        answeredStatus: null,
      };
      const index = requests.push(record) - 1;
      const decision = behaviour(record, index);
      if (decision === 'hang') {
        holding.set(res, record);
        res.on('close', () => {
          holding.delete(res);
          notify();
        });
      } else {
        answer(res, record, decision.status, decision.body);
      }
      notify();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hooks`,
    requests,
    respond(next) {
      behaviour = next;
    },
    held: () => holding.size,
    release(status = 200) {
      for (const [res, record] of [...holding]) {
        holding.delete(res);
        if (!res.destroyed) answer(res, record, status);
      }
    },
    waitFor(what, predicate, waitMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(requests)) return;
          cleanup();
          resolve();
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(`receiver: still waiting for ${what} after ${waitMs} ms (${requests.length} requests so far)`),
          );
        }, waitMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    close() {
      return new Promise((resolve) => {
        for (const res of holding.keys()) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
