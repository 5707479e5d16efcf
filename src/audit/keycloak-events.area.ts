import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { KeycloakArea } from '../keycloak/keycloak.area.ts';
import type { Tenants } from '../platform/platform.area.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { Clock } from '../time/clock.ts';
import { every, type Periodic } from '../time/every.ts';
import type { AuditWriter } from './audit-writer.ts';
import { createKeycloakEventCursors } from './keycloak-event-cursors.ts';
import {
  createKeycloakEventPull,
  type KeycloakEventMetrics,
  type KeycloakEventPullDeps,
} from './keycloak-event-pull.ts';
import { createKeycloakEventSource } from './keycloak-event-source.ts';

/**
 * Keycloak's own events of master and of every organization's realm, pulled into their audit
 * logs every AUDIT_KEYCLOAK_EVENTS_SECONDS (docs/audit.md). Keycloak being down only delays
 * them: a failed pull is counted (`realmgate_audit_keycloak_pulls_total`), not a readiness
 * failure, and the next one takes what the last missed.
 */
export function pullKeycloakEvents(
  shared: {
    config: Config;
    logger: Logger;
    clock: Clock;
    db: Knex;
    metrics: KeycloakEventMetrics;
  },
  tenants: Pick<Tenants, 'organizationsRepo'>,
  keycloak: Pick<KeycloakArea, 'calls' | 'adminSession'>,
  writer: Pick<AuditWriter, 'record' | 'flush'>,
  /** Told each realm's events as they are pulled (the auth area ends Basic logins by them). */
  seen?: KeycloakEventPullDeps['seen'],
): Periodic {
  const seconds = shared.config.AUDIT_KEYCLOAK_EVENTS_SECONDS;
  if (seconds === 0) return { stop: () => Promise.resolve() };
  const pull = createKeycloakEventPull({
    source: createKeycloakEventSource({
      ...keycloak,
      adminUsername: shared.config.KEYCLOAK_ADMIN_USERNAME,
    }),
    cursors: createKeycloakEventCursors(shared.db),
    writer,
    realms: async () => [
      MASTER_REALM,
      ...(await tenants.organizationsRepo.list()).map((organization) => organization.id),
    ],
    holder: `${hostname()}:${process.pid}:${randomUUID()}`,
    clock: shared.clock,
    logger: shared.logger,
    metrics: shared.metrics,
    seen,
  });
  // pullAll counts and logs its own failures.
  return every(seconds * 1000, () => pull.pullAll(), { onError: () => undefined });
}
