import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testEnv } from './test-env.ts';

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

/** A database of a suite's own on the test stack's PostgreSQL server. */
export interface OwnDatabase {
  /** `realmgate_<label>_<random hex>`: suites run at once never share one. */
  readonly name: string;
  /** Its URL; through another address (`host:port`, a relay's) when `host` is given. */
  url(host?: string): string;
  create(): Promise<void>;
  /** Drops it, ending the sessions still on it; nothing when it was never made. */
  drop(): Promise<void>;
}

/**
 * A database of the suite's own, so that its large log or the locks it takes slow no other
 * suite on the shared server. Made by `create` and dropped by `drop`, in the suite's hooks; the
 * test stack's address is read there, not at import (it is provided to the test files).
 */
export function ownDatabase(label: string): OwnDatabase {
  const name = `realmgate_${label}_${randomBytes(4).toString('hex')}`;
  const server = () => testEnv().databaseUrl.replace(/\/[^/]*$/, '');
  return {
    name,
    url(host) {
      const url = new URL(testEnv().databaseUrl);
      url.pathname = `/${name}`;
      if (host !== undefined) url.host = host;
      return url.href;
    },
    create: () => onPostgresServer(server(), `create database ${name}`),
    drop: () => onPostgresServer(server(), `drop database if exists ${name} with (force)`),
  };
}
