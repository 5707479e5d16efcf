import { ensureKeycloakHome, KEYCLOAK_VERSION } from './distribution.ts';

/** `npm run keycloak:install`: fetch and build the pinned Keycloak ahead of time. */
const home = await ensureKeycloakHome({ log: (message) => console.log(message) });
console.log(`Keycloak ${KEYCLOAK_VERSION} is ready in ${home}`);
