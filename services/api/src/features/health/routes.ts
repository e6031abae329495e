import { z } from 'zod';
import { register } from 'prom-client';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import type { DatabasesReport } from '../../read-routing.ts';

export type ReadinessCheck = () => Promise<void>;

const ReadinessResponse = z.object({
  status: z.enum(['ready', 'not_ready']),
  checks: z.record(z.string(), z.object({ ok: z.boolean(), error: z.string().optional() })),
  /** Which databases the process uses; a replica that lags or is down is no failure (reads go to the primary). */
  databases: z.object({
    primary: z.object({ endpoint: z.string() }),
    replica: z
      .object({
        endpoint: z.string(),
        reachable: z.boolean(),
        lagSeconds: z.number().nullable(),
        maxLagSeconds: z.number(),
        readsTo: z.enum(['replica', 'primary']),
        checkedAt: z.string().nullable(),
        error: z.string().optional(),
      })
      .optional(),
  }),
});

/** Liveness, readiness (each dependency probed) and Prometheus metrics. */
export function healthRoutes(checks: Record<string, ReadinessCheck>, databases: () => DatabasesReport): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'root',
      path: '/healthz',
      operationId: 'healthz',
      summary: 'Liveness probe',
      tags: ['Operations'],
      auth: 'public',
      hidden: true,
      responses: { 200: { description: 'The process is up', schema: z.object({ status: z.literal('ok') }) } },
      handler: async (ctx) => {
        ctx.body = { status: 'ok' };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'root',
      path: '/readyz',
      operationId: 'readyz',
      summary: 'Readiness probe: database and broker reachable',
      tags: ['Operations'],
      auth: 'public',
      hidden: true,
      responses: {
        200: { description: 'Every dependency answers', schema: ReadinessResponse },
        503: { description: 'A dependency does not answer', schema: ReadinessResponse },
      },
      handler: async (ctx) => {
        const results = await Promise.all(
          Object.entries(checks).map(async ([name, check]) => {
            try {
              await withTimeout(check(), 3000);
              return [name, { ok: true }] as const;
            } catch (error) {
              return [name, { ok: false, error: error instanceof Error ? error.message : String(error) }] as const;
            }
          }),
        );
        const ready = results.every(([, result]) => result.ok);
        ctx.status = ready ? 200 : 503;
        ctx.body = {
          status: ready ? 'ready' : 'not_ready',
          checks: Object.fromEntries(results),
          databases: databases(),
        };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'root',
      path: '/metrics',
      operationId: 'metrics',
      summary: 'Prometheus metrics',
      tags: ['Operations'],
      auth: 'public',
      hidden: true,
      responses: { 200: { description: 'Prometheus text format', contentType: 'text/plain' } },
      handler: async (ctx) => {
        ctx.type = register.contentType;
        ctx.body = await register.metrics();
      },
    }),
  ];
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
