import type { Knex } from 'knex';
import { SchemaNotCurrentError } from './database-failures.ts';

/** What of knex's client this module touches; not in its typings. */
interface ConnectionLender {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
}

export interface SchemaGate {
  /**
   * Whether PostgreSQL answers (`select 1`), past the gate: rejects as a query would when it
   * cannot be reached.
   */
  probe(): Promise<void>;
}

/**
 * Holds every query of `db` back until `current()`: a process that started while PostgreSQL was
 * unreachable runs nothing on the database between its return and the migration (the tables
 * a query reads may not exist yet, or lack a column: 42P01, 42703), nor writes on an older
 * schema. Each query is refused with SchemaNotCurrentError, answered 503 `503-00003` as an
 * unreachable database is. Once current, the pool lends its connections as before. The
 * migration runs on a pool of its own (migrationDatabase), which the gate does not hold.
 */
export function gateUntilSchemaCurrent(db: Knex, current: () => boolean): SchemaGate {
  const client = db.client as ConnectionLender;
  const acquire = client.acquireConnection.bind(client);
  client.acquireConnection = () => {
    if (!current()) return Promise.reject(new SchemaNotCurrentError());
    // Current for good: the gate steps aside.
    client.acquireConnection = acquire;
    return acquire();
  };
  return {
    async probe() {
      const connection = await acquire();
      try {
        await db.select(db.raw('1')).connection(connection);
      } finally {
        await client.releaseConnection(connection);
      }
    },
  };
}
