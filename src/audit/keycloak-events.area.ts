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
  type KeycloakEventPull,
  type KeycloakEventPullDeps,
} from './keycloak-event-pull.ts';
import { createKeycloakEventSource } from './keycloak-event-source.ts';

/**
 * Keycloak's own events of master and of every organization's realm, pulled every
 * AUDIT_KEYCLOAK_EVENTS_SECONDS (docs/audit.md) for what uses them: the auth area (`seen`: it
 * ends Basic logins on credential changes), whether the audit log is on or not, and the audit
 * log (`writer`, when it is on). Each purpose is a pull of its own, with its own cursors and
 * leases: a log turned on later takes its records from where it stopped, and a log catching up
 * does not hold the credential changes back. Keycloak being down only delays them: a failed
 * pull is counted (`realmgate_audit_keycloak_pulls_total`), not a readiness failure, and the
 * next one takes what the last missed.
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
  uses: {
    /** The audit log's writer: its records of the events; undefined while the log is off. */
    writer?: Pick<AuditWriter, 'offer' | 'flush'>;
    /** Told each realm's events as they are pulled (the auth area ends Basic logins by them). */
    seen?: KeycloakEventPullDeps['seen'];
  },
): Periodic {
  const seconds = shared.config.AUDIT_KEYCLOAK_EVENTS_SECONDS;
  if (seconds === 0 || (!uses.writer && !uses.seen)) return { stop: () => Promise.resolve() };
  // One source: a realm's facts (its events turned on, the gateway's accounts) are read once.
  const common = {
    source: createKeycloakEventSource({
      ...keycloak,
      adminUsername: shared.config.KEYCLOAK_ADMIN_USERNAME,
    }),
    realms: async () => [
      MASTER_REALM,
      ...(await tenants.organizationsRepo.list()).map((organization) => organization.id),
    ],
    holder: `${hostname()}:${process.pid}:${randomUUID()}`,
    clock: shared.clock,
    logger: shared.logger,
    metrics: shared.metrics,
  };
  const pulls: KeycloakEventPull[] = [];
  // The credential changes first: a log with many events to take does not delay them.
  if (uses.seen) {
    pulls.push(
      createKeycloakEventPull({
        ...common,
        purpose: 'auth',
        cursors: createKeycloakEventCursors(shared.db, 'auth'),
        seen: uses.seen,
      }),
    );
  }
  if (uses.writer) {
    pulls.push(
      createKeycloakEventPull({
        ...common,
        purpose: 'audit',
        cursors: createKeycloakEventCursors(shared.db, 'audit'),
        writer: uses.writer,
      }),
    );
  }
  // pullAll counts and logs its own failures, and starts no realm once stopped.
  return every(
    seconds * 1000,
    async (signal) => {
      for (const pull of pulls) await pull.pullAll(signal);
    },
    { onError: () => undefined },
  );
}
