import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { testEnv } from './test-env.ts';

/**
 * Makes the calling file wait for its turn among the files whose replicas pull Keycloak's
 * events, and hold it until its end. Such replicas share each realm's pull cursor (PostgreSQL)
 * but, as test replicas, no cache: a replica of one file would take another file's events and
 * tell only itself. Files run two at a time (vitest.config.ts), so these take turns: a
 * PostgreSQL advisory lock, held by a connection of their own. Call it first in the `describe`.
 */
export function takeTurnsPullingKeycloakEvents(): void {
  let client: pg.Client | undefined;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: testEnv().databaseUrl });
    await client.connect();
    await client.query(
      "select pg_advisory_lock(hashtext('realmgate-test'), hashtext('keycloak-event-pulls'))",
    );
  });
  // Registered first, so run last: after the file's replicas are closed.
  afterAll(async () => {
    await client?.end();
  });
}
