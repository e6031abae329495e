import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { register } from 'prom-client';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

export interface HealthReport {
  healthy: boolean;
  /** What the process checked, e.g. `{ mqtt: 'connected' }` or `{ database: 'reachable' }`. */
  detail: Record<string, string>;
}

/**
 * The small HTTP server of a standalone ingest or worker process: `/metrics`
 * (Prometheus text, prom-client's global registry) and `/healthz` (200 when the
 * process's own check passes, else 503). In the all-in-one the API serves both.
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  health: () => HealthReport | Promise<HealthReport>;
}): Promise<MetricsServer> {
  const reply = (response: http.ServerResponse, status: number, body: unknown) =>
    response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET') {
      reply(response, 405, { error: 'method not allowed', code: 'method_not_allowed' });
    } else if (path === '/metrics') {
      register.metrics().then(
        (body) => response.writeHead(200, { 'content-type': register.contentType }).end(body),
        () => reply(response, 500, { error: 'metrics unavailable', code: 'internal_error' }),
      );
    } else if (path === '/healthz') {
      Promise.resolve()
        .then(options.health)
        .then(
          (report) =>
            reply(response, report.healthy ? 200 : 503, {
              status: report.healthy ? 'ok' : 'unavailable',
              ...report.detail,
            }),
          () => reply(response, 503, { status: 'unavailable' }),
        );
    } else {
      reply(response, 404, { error: 'not found', code: 'not_found' });
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
