import type { Logger } from 'pino';
import type { ReadinessReport } from '../http/health.router.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { pointRealmAtGateway, realmNames } from './realm-admin/backchannel-logout.ts';
import { ensureGatewayAudience } from './realm-admin/gateway-audience.ts';

/** After a pass that left a realm unset (or could not list them), the next one starts this late. */
const RETRY_MS = 60_000;
/** Readiness names at most this many unset realms (and counts them all). */
const NAMED_REALMS = 20;

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
 * answer the re-check's introspection for every client's tokens. Runs in the background (the
 * gateway serves meanwhile); a realm where either fails is logged and named in readiness
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
      try {
        if (await adminSession.run((admin) => pointRealmAtGateway(admin, realm, url))) {
          logger.info({ realm }, 'back-channel logout URL set on the realm');
        }
      } catch (err) {
        unset.push(realm);
        logger.warn(
          { err, realm },
          'back-channel logout URL could not be set: sessions ended in Keycloak end at the gateway on the re-check only',
        );
        continue;
      }
      try {
        if (await adminSession.run((admin) => ensureGatewayAudience(admin, realm))) {
          logger.info({ realm }, "the gateway put in the audience of the realm's tokens");
        }
      } catch (err) {
        unset.push(realm);
        logger.warn(
          { err, realm },
          "the gateway could not be put in the audience of the realm's tokens: the re-check may refuse its browser clients' live tokens",
        );
      }
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
