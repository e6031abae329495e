import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { register } from 'prom-client';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * The standalone ingest's own small HTTP server: `/metrics` (Prometheus text, the
 * global registry) and `/healthz` (200 while connected to the broker, else 503). In
 * the all-in-one the API serves both instead.
 */
export async function startMetricsServer(options: { host: string; port: number; isHealthy: () => boolean }): Promise<MetricsServer> {
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'method not allowed', code: 'method_not_allowed' }));
    } else if (path === '/metrics') {
      register.metrics().then(
        (body) => response.writeHead(200, { 'content-type': register.contentType }).end(body),
        () => response.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'metrics unavailable', code: 'internal_error' })),
      );
    } else if (path === '/healthz') {
      const healthy = options.isHealthy();
      response
        .writeHead(healthy ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: healthy ? 'ok' : 'unavailable', mqtt: healthy ? 'connected' : 'disconnected' }));
    } else {
      response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not found', code: 'not_found' }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
