import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { startLocalKeycloak, type LocalKeycloak } from '../../keycloak/launcher.ts';
import type { Config } from '../config/config.ts';

const REALM_EXPORT_DIR = fileURLToPath(new URL('../../realm-export', import.meta.url));

/**
 * Starts the local Keycloak the configuration describes (state under `<DATA_DIR>/keycloak`), on
 * the PostgreSQL database `KEYCLOAK_DB_URL` names, else on embedded H2.
 * The one code path used by `npm start`, the test setup and CI.
 */
export function startConfiguredKeycloak(
  config: Config,
  log: (message: string) => void,
): Promise<LocalKeycloak> {
  if (!config.KEYCLOAK_ADMIN_PASSWORD || !config.KEYCLOAK_CLIENT_SECRET) {
    throw new Error('a local Keycloak needs KEYCLOAK_ADMIN_PASSWORD and KEYCLOAK_CLIENT_SECRET');
  }
  return startLocalKeycloak({
    stateDir: path.join(config.DATA_DIR, 'keycloak'),
    httpPort: config.KEYCLOAK_HTTP_PORT,
    managementPort: config.KEYCLOAK_MANAGEMENT_PORT,
    publicUrl: config.PUBLIC_URL,
    adminPublicUrl: config.ADMIN_PUBLIC_URL,
    adminUsername: config.KEYCLOAK_ADMIN_USERNAME,
    adminPassword: config.KEYCLOAK_ADMIN_PASSWORD,
    gatewayClientSecret: config.KEYCLOAK_CLIENT_SECRET,
    realmExportDir: REALM_EXPORT_DIR,
    dbUrl: config.KEYCLOAK_DB_URL,
    log,
  });
}
