import { loadConfig, type Config } from '../../src/config/config.ts';
import { startGateway, type Gateway } from '../../src/gateway.ts';
import type { Logger } from 'pino';
import { createLogger } from '../../src/http/logger.ts';
import type { Clock } from '../../src/time/clock.ts';
import { testBackchannelUrl } from './keycloak.ts';
import { testEnv } from './test-env.ts';

export interface Replica {
  gateway: Gateway;
  config: Config;
  /** Base URL of the replica's public listener. */
  url: string;
}

/**
 * Starts another gateway replica in this test process, in front of the test Keycloak and
 * database, with the deployment's public address (tokens name it as issuer) and `overrides`; on
 * `clock` when a test moves the replica's time forward (test-clock.ts), else on the system's.
 */
export async function startReplica(
  port: number,
  overrides: Record<string, string> = {},
  logger: Logger = createLogger('silent'),
  clock?: Clock,
): Promise<Replica> {
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: String(port),
    ADMIN_PORT: String(port + 1),
    PUBLIC_URL: testEnv().publicUrl,
    KEYCLOAK_URL: testEnv().keycloakUrl,
    KEYCLOAK_ADMIN_PASSWORD: testEnv().keycloakAdminPassword,
    KEYCLOAK_CLIENT_SECRET: testEnv().gatewayClientSecret,
    DATABASE_URL: testEnv().databaseUrl,
    TOKEN_CLOCK_LEEWAY_SECONDS: '1',
    BACKCHANNEL_LOGOUT_URL: testBackchannelUrl(),
    // As the global gateway (global-setup.ts): the audit log on.
    AUDIT_LOG_ENABLED: 'true',
    // Keycloak's events are pulled by the suite that shows them (audit-keycloak-events.test.ts):
    // every replica pulling every test realm each 30 s would load the shared Keycloak.
    AUDIT_KEYCLOAK_EVENTS_SECONDS: '0',
    ...overrides,
  });
  // `KEYCLOAK_URL` in `overrides` points the replica at another Keycloak (or a fake one).
  const keycloakUrl = config.KEYCLOAK_URL ?? testEnv().keycloakUrl;
  const gateway = await startGateway(config, keycloakUrl, logger, undefined, clock);
  return { gateway, config, url: `http://127.0.0.1:${port}` };
}

/** How many DPoP proofs `replica` refused for `reason` (its admin listener's metrics). */
export async function dpopRefusals(replica: Replica, reason: string): Promise<number> {
  const metrics = await (
    await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`)
  ).text();
  const line = metrics
    .split('\n')
    .find(
      (text) =>
        text.startsWith('realmgate_auth_failures_total{') &&
        text.includes('scheme="dpop"') &&
        text.includes(`reason="${reason}"`),
    );
  return line === undefined ? 0 : Number(line.split(' ').pop());
}
