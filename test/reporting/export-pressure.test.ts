import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@gantry/logger';
import { exportQueryParams, exportResponses, sendExport } from '../../services/api/src/http/export.ts';
import { errorsAndAccessLog } from '../../services/api/src/http/middleware.ts';
import { defineRoute, RouteRegistry } from '../../services/api/src/http/route.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { parseCsv, readXlsxRows } from './files.ts';

// The export module under pressure, over real HTTP on a real port and a real PostgreSQL:
// clients that leave (their query must stop) and clients that read slowly (the API must
// not hold the file meanwhile). Nothing here asserts a duration: waits poll for a state.

let db: TestDatabase;
let server: http.Server;
let port: number;
/** The server side of the latest export response, to read how much it buffers. */
let lastResponse: http.ServerResponse | undefined;

const ROWS = 50_000;

/**
 * The queries behind the routes. `stall` sleeps an hour at row `$1` (test_stall, declared
 * immutable so the page check, which needs no output column, skips it as it skips any
 * unused column): the backend is then computing, not writing, so only a cancel stops it.
 * `probe` sleeps an hour in its WHERE, before the first row, during the page check.
 */
const queries = {
  stall: `/* test:stall */
    SELECT g AS n, repeat('x', 1000) AS pad, test_stall(CASE WHEN g >= $1::int THEN 3600 ELSE 0 END) AS late
      FROM generate_series(1, 60000) AS g
     ORDER BY g`,
  probe: `/* test:stall */
    SELECT g AS n, '' AS pad, NULL::bigint AS late
      FROM generate_series(1, 10) AS g
     WHERE test_stall(CASE WHEN g = 1 THEN 3600 ELSE $1::int END) = 0
     ORDER BY g`,
  wide: `/* test:wide */
    SELECT g AS n, repeat(md5(g::text), 64) AS pad, $1::bigint AS late
      FROM generate_series(1, ${ROWS}) AS g
     ORDER BY g`,
  dense: `/* test:wide */
    SELECT g AS n, (SELECT string_agg(md5(g::text || ':' || i), '') FROM generate_series(1, 32) AS i) AS pad, $1::bigint AS late
      FROM generate_series(1, ${ROWS}) AS g
     ORDER BY g`,
};

beforeAll(async () => {
  db = await createTestDatabase('export_pressure');
  await db.pool.query(
    `CREATE FUNCTION test_stall(seconds int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
     BEGIN IF seconds > 0 THEN PERFORM pg_sleep(seconds); END IF; RETURN 0; END $$`,
  );
  const registry = new RouteRegistry();
  for (const format of ['csv', 'xlsx'] as const) {
    registry.add(
      defineRoute({
        method: 'get',
        base: 'root',
        path: `/pressure.${format}`,
        operationId: `pressure${format}`,
        summary: 'test export',
        tags: ['test'],
        auth: 'public',
        request: {
          query: z.object({
            ...exportQueryParams,
            query: z.enum(['stall', 'probe', 'wide', 'dense']),
            at: z.coerce.number().int().default(0),
          }),
        },
        responses: exportResponses(format),
        handler: async (ctx, { query }) => {
          lastResponse = ctx.res;
          await sendExport(ctx, db.pool, {
            format,
            filename: 'pressure',
            columns: [{ name: 'n', type: 'integer' }, { name: 'pad' }, { name: 'late', type: 'integer' }],
            query: { text: queries[query.query], values: [query.at] },
            offset: query.offset,
          });
        },
      }),
    );
  }
  const router = registry.router({ validateResponses: false, authenticate: async () => ({ kind: 'public' }) });
  const koa = new Koa();
  koa.silent = true;
  koa.use(errorsAndAccessLog(silentLogger()));
  koa.use(router.routes());
  server = http.createServer(koa.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await db?.drop();
});

interface Backend {
  pid: number;
  state: string;
  waitEvent: string | null;
}

/** The backends running a test query of this database (not this check itself). */
async function backends(marker: string): Promise<Backend[]> {
  const { rows } = await db.pool.query<Backend>(
    `SELECT pid, state, wait_event AS "waitEvent" FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'
        AND query NOT LIKE '%pg_stat_activity%'`,
    [marker],
  );
  return rows;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until the condition holds; gives up after `attempts` (the test then fails on its own assertion). */
async function until(condition: () => Promise<boolean>, attempts = 600, everyMs = 100): Promise<void> {
  for (let attempt = 0; attempt < attempts && !(await condition()); attempt += 1) await pause(everyMs);
}

/** A raw HTTP client: sends the GET and hands back the socket and what it has read. */
function rawGet(path: string) {
  const socket = net.connect(port, '127.0.0.1');
  const state = { received: 0, chunks: [] as Buffer[], ended: false };
  socket.on('data', (chunk: Buffer) => {
    state.received += chunk.length;
    state.chunks.push(chunk);
  });
  socket.on('end', () => {
    state.ended = true;
  });
  socket.on('error', () => undefined);
  // HTTP/1.0: the body is sent as is (no chunked encoding) and ends with the connection.
  socket.write(`GET ${path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n`);
  return { socket, state };
}

describe('a client that goes away', () => {
  it('cancels the query still computing the page check, and the page beside it (before any byte was sent)', async () => {
    const { socket } = rawGet('/pressure.csv?query=probe&at=0');
    // The page check runs on a connection of its own while the page is computed.
    const active = async () => (await backends('test:stall')).filter((backend) => backend.state === 'active').length;
    await until(async () => (await active()) === 2);
    expect(await active()).toBe(2);
    socket.destroy();
    // Left alone the query would sleep for an hour.
    await until(async () => (await backends('test:stall')).length === 0);
    expect(await backends('test:stall')).toEqual([]);
  });

  it.each(['csv', 'xlsx'])('cancels the %s query computing the rows after the ones already sent', async (format) => {
    const { socket, state } = rawGet(`/pressure.${format}?query=stall&at=2000`);
    // The first rows arrive, then the backend computes (not writes) row 2,000 for an hour.
    await until(async () => state.received > 0 && (await backends('test:stall')).some((b) => b.state === 'active'));
    expect(state.received).toBeGreaterThan(0);
    expect((await backends('test:stall')).map((backend) => backend.state)).toContain('active');
    socket.destroy();
    await until(async () => (await backends('test:stall')).length === 0);
    expect(await backends('test:stall')).toEqual([]);
    // The pool still serves exports.
    const again = await fetch(`http://127.0.0.1:${port}/pressure.csv?query=stall&at=100000`);
    expect(again.headers.get('x-export-truncated')).toBe('true');
    await again.body?.cancel();
  });
});

/** Bytes this process holds on the heap and in buffers. */
// Live memory only: garbage the collector has not reached yet is not memory the export holds.
v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;
const held = () => {
  collectGarbage();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
};

describe('a client that reads slowly', () => {
  it.each([
    ['csv', 'wide', 100_000_000],
    ['xlsx', 'dense', 25_000_000],
  ] as const)(
    'holds the %s export in PostgreSQL, not in the API, and then delivers all of it',
    async (format, query, size) => {
      const before = held();
      const { socket, state } = rawGet(`/pressure.${format}?query=${query}&at=7`);
      await until(async () => state.received >= 64 * 1024, 600, 20);
      socket.pause();
      // Wait until everything has stopped: the server's socket sends nothing more, and
      // the database is not producing rows: it waits for the API to read (ClientWrite, in
      // COPY), or for the next cursor read (ClientRead), or it has finished the query.
      let written = -1;
      await until(
        async () => {
          const now = lastResponse?.socket?.bytesWritten ?? 0;
          const still = now === written;
          written = now;
          const producing = (await backends('test:wide')).some(
            (backend) =>
              backend.state === 'active' && backend.waitEvent !== 'ClientWrite' && backend.waitEvent !== 'ClientRead',
          );
          return still && !producing;
        },
        600,
        250,
      );
      const sent = lastResponse?.socket?.bytesWritten ?? 0;
      // Far less than the file has left the server: the client holds it back.
      expect(sent).toBeLessThan(size / 2);
      // What the server buffers for this response: a high-water mark or so, not the file.
      const buffered = (lastResponse?.writableLength ?? 0) + (lastResponse?.socket?.writableLength ?? 0);
      expect(buffered).toBeLessThan(1_000_000);
      // The process holds no copy of the file while it waits (margin for everything else).
      expect(held() - before).toBeLessThan(size / 3);
      // The rest of the file is still in PostgreSQL: its query has not finished. It waits in
      // COPY for the API to read (the back-pressure reaches the database): the CSV's
      // COPY, and the XLSX's COPY of its rows' XML.
      expect((await backends('test:wide')).map((backend) => backend.waitEvent)).toEqual(['ClientWrite']);
      socket.resume();
      await until(async () => state.ended, 1200, 100);
      expect(state.ended).toBe(true);
      const response = Buffer.concat(state.chunks);
      const body = response.subarray(response.indexOf('\r\n\r\n') + 4);
      const rows = format === 'csv' ? parseCsv(body.toString('utf8')) : await readXlsxRows(new Uint8Array(body).buffer);
      expect(rows).toHaveLength(ROWS + 1);
      expect(rows.at(-1)?.[0]).toBe(String(ROWS));
    },
    300_000,
  );
});
