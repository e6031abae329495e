/** The PostgreSQL server tests use (any database on it; the name is replaced). */
export function serverUrl(): string {
  return process.env.GANTRY_TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
