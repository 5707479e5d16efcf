import type { Config } from '../config/config.ts';
import { DEMO } from './seed-demo.ts';
import { base32OfOtpSecret, otpauthUri } from './totp.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

const FIELD = `node -pe 'JSON.parse(require("fs").readFileSync(0,"utf8"))`;

/**
 * Prints the demo's addresses, credentials and ready-to-paste curl commands (spec 4.1/5.2).
 * Demo mode only: these passwords are throwaway values generated for this machine.
 */
export function printDemoWelcome(
  config: Config,
  secrets: { demoPassword: string; otpSecret: string; keycloakAdminPassword: string },
): void {
  const base = config.PUBLIC_URL;
  const token = (realm: string) => `${base}/auth/realms/${realm}/protocol/openid-connect/token`;
  const lines = [
    '',
    '================ realmgate demo is ready ================',
    `public  {base_url}:           ${base}`,
    `admin   {admin_site_address}: ${config.ADMIN_PUBLIC_URL}`,
    `Keycloak console (spec 5.3): ${config.ADMIN_PUBLIC_URL}/auth/admin/master/console/#/realms/master`,
    `  sign in as ${config.KEYCLOAK_ADMIN_USERNAME}, password ${secrets.keycloakAdminPassword}`,
    '  access token:  Clients > _platform-api > Advanced > Advanced settings > Access Token Lifespan > Save',
    '  refresh token: Realm settings > Sessions > Offline Session Idle / Offline Session Max > Save',
    `  or the API: curl -s -X PATCH -u ${DEMO.adminUser}:'${secrets.demoPassword}' -H 'content-type: application/json' -d '{"access_token_lifespan":86400,"offline_session_idle_timeout":31536000,"offline_session_max_lifespan":31536000}' ${base}/api/platform/token-lifetimes`,
    `  or the CLI: scripts/node24.sh npx realmgate lifetimes set master --access 1d --offline-idle 365d --offline-max 365d (REALMGATE_USERNAME=${DEMO.adminUser}, REALMGATE_PASSWORD the demo password)`,
    '',
    `Demo users (password ${secrets.demoPassword}):`,
    `  master:   ${DEMO.adminUser}`,
    `  ${DEMO.organization}: ${DEMO.user} (workspace ${DEMO.workspace}), ${DEMO.outsider} (no workspace), ${DEMO.otpUser} (two-factor)`,
    `  ${DEMO.otpUser} OTP secret (base32): ${base32OfOtpSecret(secrets.otpSecret)}`,
    `  ${otpauthUri(secrets.otpSecret, DEMO.otpUser, 'realmgate demo')}`,
    '',
    '# 1. Refresh token for the administrator (password grant, spec 4.1):',
    `REFRESH=$(curl -s -X POST ${token(MASTER_REALM)} -d client_id=_platform-api -d grant_type=password -d scope=openid+offline_access -d username=${DEMO.adminUser} -d password='${secrets.demoPassword}' | ${FIELD}.refresh_token')`,
    '# 2. Access token from it (refresh grant):',
    `ACCESS=$(curl -s -X POST ${token(MASTER_REALM)} -d client_id=_platform-api -d grant_type=refresh_token -d refresh_token="$REFRESH" | ${FIELD}.access_token')`,
    '# 3. The same for an organization user:',
    `curl -s -X POST ${token(DEMO.organization)} -d client_id=_${DEMO.organization}-api -d grant_type=password -d scope=openid+offline_access -d username=${DEMO.user} -d password='${secrets.demoPassword}'`,
    '# 4. A two-factor user adds totp (the 6 digits from the authenticator app):',
    `curl -s -X POST ${token(DEMO.organization)} -d client_id=_${DEMO.organization}-api -d grant_type=password -d scope=openid+offline_access -d username=${DEMO.otpUser} -d password='${secrets.demoPassword}' -d totp=123456`,
    '# Health:',
    `curl -s ${base}/readyz`,
    '==========================================================',
    '',
  ];
  process.stdout.write(lines.join('\n'));
}
