import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the receiver got it. */
export interface Received {
  id: string;
  attempt: number;
  at: number;
  body: string;
  signature: string;
  status: number;
}

/**
 * A webhook receiver that can go down — stop listening, so attempts get "connection
 * refused", as a crashed or redeployed endpoint gives — and come back on the same port
 * (the subscription's URL does not change). Answers 200 to everything while up.
 */
export interface DrillReceiver {
  url: string;
  requests: Received[];
  isUp(): boolean;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startDrillReceiver(): Promise<DrillReceiver> {
  const requests: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({
        id: String(req.headers['x-service-webhook-id'] ?? ''),
        attempt: Number(req.headers['x-service-webhook-attempt'] ?? 0),
        at: Date.now(),
        body: Buffer.concat(chunks).toString('utf8'),
        signature: String(req.headers['x-service-signature'] ?? ''),
        status: 200,
      });
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
    });
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const { port } = server.address() as AddressInfo;
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return {
    url: `http://127.0.0.1:${port}/drill-hooks`,
    requests,
    isUp: () => server.listening,
    down: stop,
    up: () => listen(port),
    close: stop,
  };
}

/** `sha256=<hex HMAC-SHA256 of the body>` as the delivery contract signs it. */
export function signatureOf(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}
