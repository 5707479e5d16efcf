import type { Logger } from 'pino';
import type { ReadinessReport } from '../http/health.router.ts';
import type { KeycloakAdmin } from '../keycloak/admin-client.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { pointRealmAtGateway, realmNames } from './realm-admin/backchannel-logout.ts';
import { ensureGatewayAudience } from './realm-admin/gateway-audience.ts';

/** After a pass that left a realm unset (or could not list them), the next one starts this late. */
const RETRY_MS = 60_000;
/** Readiness names at most this many unset realms (and counts them all). */
const NAMED_REALMS = 20;

/**
 * One thing every realm must have. `run` resolves to whether it changed the realm; the steps are
 * independent, so one failing does not keep the others from trying (a realm without its
 * back-channel URL still gets the gateway in its tokens' audience).
 */
interface AlignmentStep {
  /** Names the step in the log lines. */
  name: string;
  run(admin: KeycloakAdmin, realm: string, url: string): Promise<boolean>;
  /** Logged (info) when the step changed the realm. */
  changed: string;
  /** Logged (warn) when the step failed: what the realm lacks until a later pass. */
  failed: string;
}

const STEPS: readonly AlignmentStep[] = [
  {
    name: 'backchannel logout url',
    run: pointRealmAtGateway,
    changed: 'back-channel logout URL set on the realm',
    failed:
      'back-channel logout URL could not be set: sessions ended in Keycloak end at the gateway on the re-check only',
  },
  {
    name: 'gateway audience',
    run: (admin, realm) => ensureGatewayAudience(admin, realm),
    changed: "the gateway put in the audience of the realm's tokens",
    failed:
      "the gateway could not be put in the audience of the realm's tokens: the re-check may refuse its browser clients' live tokens",
  },
];

/** Where the alignment of the existing realms stands. */
type Standing =
  | { state: 'pending' }
  | { state: 'done' }
  | { state: 'unlisted' }
  | { state: 'partial'; unset: string[] };

/**
 * Brings every existing realm (master included) in line at start, as provisioning makes new
 * ones: its API client and the gateway's client point at the back-channel logout URL
 * (realm-admin/backchannel-logout.ts), so realms made before this setting, or while it had
 * another value, announce their ended sessions to this gateway; and its clients' access tokens
 * name the gateway in `aud` (realm-admin/gateway-audience.ts), so realms made before that
 * answer the re-check's introspection for every client's tokens (STEPS, each tried even when
 * another failed). Runs in the background (the gateway serves meanwhile); a realm where either
 * fails is logged and named in readiness
 * (`backchannel_logout`, its name from before the pass did both: degraded), and tried again a
 * minute later, as is the whole pass when Keycloak cannot list the realms. Never fatal.
 */
export function createRealmAlignment(deps: {
  adminSession: Pick<AdminSession, 'run'>;
  url: string;
  logger: Logger;
  retryMs?: number;
}) {
  const { adminSession, url, logger } = deps;
  let standing: Standing = { state: 'pending' };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;

  async function pass(): Promise<void> {
    let realms: string[];
    try {
      realms = await adminSession.run(realmNames);
    } catch (err) {
      logger.warn({ err }, 'realm alignment: realms could not be listed; trying again');
      standing = { state: 'unlisted' };
      return;
    }
    const unset: string[] = [];
    for (const realm of realms) {
      if (closed) return;
      let aligned = true;
      for (const step of STEPS) {
        try {
          if (await adminSession.run((admin) => step.run(admin, realm, url))) {
            logger.info({ realm, step: step.name }, step.changed);
          }
        } catch (err) {
          aligned = false;
          logger.warn({ err, realm, step: step.name }, step.failed);
        }
      }
      if (!aligned) unset.push(realm);
    }
    standing = unset.length === 0 ? { state: 'done' } : { state: 'partial', unset };
  }

  function run(): void {
    void pass().then(() => {
      if (closed || standing.state === 'done') return;
      timer = setTimeout(run, deps.retryMs ?? RETRY_MS);
      timer.unref();
    });
  }

  return {
    /** Starts the first pass (in the background). */
    start: run,
    /** The readiness check `backchannel_logout`: degraded while a realm is not aligned. */
    report(): Promise<ReadinessReport> {
      const details = { url };
      switch (standing.state) {
        case 'done':
          return Promise.resolve({ status: 'up', details });
        case 'pending':
          return Promise.resolve({ status: 'up', details: { ...details, pending: true } });
        case 'unlisted':
          return Promise.resolve({
            status: 'degraded',
            details: { ...details, realmsNotSet: 'unknown: Keycloak did not list its realms' },
          });
        case 'partial':
          return Promise.resolve({
            status: 'degraded',
            details: {
              ...details,
              realmsNotSet: standing.unset.slice(0, NAMED_REALMS),
              realmsNotSetCount: standing.unset.length,
            },
          });
      }
    },
    close(): void {
      closed = true;
      clearTimeout(timer);
    },
  };
}

export type RealmAlignment = ReturnType<typeof createRealmAlignment>;
