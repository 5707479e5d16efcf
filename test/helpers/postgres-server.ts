import pg from 'pg';

/**
 * Runs statements, in order, on the `postgres` database of the PostgreSQL server at `serverUrl`
 * (`postgres://user@host:port`): how suites create and drop databases of their own.
 */
export async function onPostgresServer(serverUrl: string, ...statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: `${serverUrl}/postgres` });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}
