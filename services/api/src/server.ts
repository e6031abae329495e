import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, type AppDeps } from './app.ts';
import { answerConnectWithApp } from './http/connect.ts';

export interface ApiServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Starts the API on host:port (port 0 picks a free one, as tests do). */
export async function startApiServer(deps: AppDeps, listen: { host: string; port: number }): Promise<ApiServer> {
  const { koa, close: closeApp } = createApp(deps);
  // Timeouts below are enforced when connections are checked; the default (every 30 s)
  // would let a slowloris client hold a socket half a minute past them.
  const handle = koa.callback();
  const server = http.createServer({ connectionsCheckingInterval: 1_000 }, handle);
  answerConnectWithApp(server, handle);
  // Slow or stalled clients must not hold connections forever.
  server.requestTimeout = deps.config.http.requestTimeoutMs;
  server.headersTimeout = Math.min(20_000, deps.config.http.requestTimeoutMs);
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = listen.host === '0.0.0.0' || listen.host === '::' ? '127.0.0.1' : listen.host;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 2_000).unref();
      }).then(closeApp),
  };
}
