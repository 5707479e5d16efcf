import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { testEnv } from './test-env.ts';

/**
 * What test files share and change. Files run two at a time (vitest.config.ts); those that
 * change one of these take turns at it, never a longer wait.
 * - `keycloak-event-pulls`: each realm's Keycloak event pull cursor (PostgreSQL), which test
 *   replicas share with no cache: a replica of one file would take another file's events and
 *   tell only itself.
 * - `bootstrap-admin-email`: the e-mail of master's bootstrap administrator, which a file gives
 *   it and takes back, expecting meanwhile that one to be the administrator's.
 */
type Shared = 'keycloak-event-pulls' | 'bootstrap-admin-email';

/**
 * Makes the calling file wait for its turn at `what`, and hold it until its end: a PostgreSQL
 * advisory lock, held by a connection of its own. Call it first in the `describe`.
 */
export function takeTurns(what: Shared): void {
  let client: pg.Client | undefined;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: testEnv().databaseUrl });
    await client.connect();
    await client.query("select pg_advisory_lock(hashtext('realmgate-test'), hashtext($1))", [what]);
  });
  // Registered first, so run last: after the file's replicas are closed.
  afterAll(async () => {
    await client?.end();
  });
}
