import pg from 'pg';

/** The PostgreSQL server tests use (any database on it; the name is replaced). */
export function serverUrl(): string {
  return process.env.GANTRY_TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
}

/** The server benchmarks use: GANTRY_BENCH_DATABASE_URL, else the tests' server. */
export function benchServerUrl(): string {
  return process.env.GANTRY_BENCH_DATABASE_URL ?? serverUrl();
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Runs fn with a connection to the server's maintenance database (create, drop, inspect databases). */
export async function onServer<T>(fn: (client: pg.Client) => Promise<T>, url: string = serverUrl()): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
