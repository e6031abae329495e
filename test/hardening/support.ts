import { createApp } from '@gantry/api';
import type { RouteSpec } from '../../services/api/src/http/route.ts';
import type { Config } from '@gantry/config';
import { createOutbox, type Pool } from '@gantry/db';
import { silentLogger } from '@gantry/logger';

/** Every route the app registers, as the running API has them (for tests generic over the registry). */
export async function registeredRoutes(pool: Pool, config: Config): Promise<RouteSpec[]> {
  const app = createApp({
    config,
    pool,
    logger: silentLogger(),
    outbox: createOutbox({ maxAttempts: config.webhooks.maxAttempts }),
    readiness: {},
  });
  const routes = [...app.registry.routes];
  await app.close();
  return routes;
}

/** The external routes a key can call (the public self-description pages excluded). */
export function externalKeyRoutes(routes: RouteSpec[]): RouteSpec[] {
  return routes.filter((route) => route.base === 'external' && route.auth === 'apiKey');
}

/** `/a/:id/b` with the given values for its path parameters. */
export function fillPath(route: RouteSpec, values: Record<string, string>): string {
  return route.path.replace(/:([A-Za-z0-9_]+)/g, (_whole, name: string) =>
    encodeURIComponent(values[name] ?? 'missing'),
  );
}

/** The simulator's seeded PRNG (mulberry32): the same seed gives the same sequence on every run. */
export { randomSource as seededRandom } from '@gantry/simulator';

export function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

/** Runs tasks with at most `width` in flight. */
export async function inParallel<T>(
  items: T[],
  width: number,
  run: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await run(items[index]!, index);
      }
    }),
  );
}

/**
 * fetch for idempotent GETs that retries once when a pooled keep-alive socket was closed
 * by the server just as it was reused (a client-side race when a test blocks the event
 * loop for seconds, as schema compilation does; not a server fault).
 */
export async function getWithRetry(url: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    if (cause?.code !== 'ECONNRESET' && cause?.code !== 'UND_ERR_SOCKET') throw error;
    return fetch(url, init);
  }
}
