import { ensureKeycloakHome, KEYCLOAK_VERSION, type KeycloakDb } from './distribution.ts';

/**
 * `npm run keycloak:install`: fetch the pinned Keycloak and build it ahead of time, once for
 * the embedded H2 database and once for PostgreSQL (`KEYCLOAK_DB_URL`, the cluster test).
 */
for (const db of ['dev-file', 'postgres'] satisfies KeycloakDb[]) {
  const home = await ensureKeycloakHome({ db, log: (message) => console.log(message) });
  console.log(`Keycloak ${KEYCLOAK_VERSION} (${db}) is ready in ${home}`);
}
