import type { Logger } from 'pino';
import type { ReadinessReport } from '../http/health.router.ts';
import type { KeycloakAdmin } from '../keycloak/admin-client.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { listRealms, pointRealmAtGateway } from './realm-admin/backchannel-logout.ts';
import { ensureGatewayAudience } from './realm-admin/gateway-audience.ts';
import { realmExists } from './realm-admin/realm-lifecycle.ts';
import type { AlignmentTarget, ListedRealm, RealmAlignmentsRepo } from './realm-alignments.repo.ts';

/** After a pass that left a realm unset (or could not list them), the next one starts this late. */
const RETRY_MS = 60_000;
/** Readiness names at most this many unset realms (and counts them all). */
const NAMED_REALMS = 20;
/**
 * The version of `STEPS`: bump it when a step is added or wants something else of a realm, so
 * that the first start of the release that has it checks every realm again. Provisioning records
 * the realms it makes as aligned under this version (`recordAligned`): a new step must also be
 * done by provisioning (realm-admin/provisioning.ts), or the realms it makes skip that step for
 * a day.
 */
export const STEPS_VERSION = 1;
/**
 * A realm recorded as aligned is checked again by the first start after this long (a day): an
 * administrator's change by hand to a client or to `basic` is repaired then (docs/keycloak.md).
 */
export const RECHECK_AFTER_SECONDS = 86_400;
/** A record of a realm Keycloak no longer lists is forgotten once this old (an hour). */
const FORGET_AFTER_SECONDS = 3600;

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
 * fails (and that Keycloak still has) is logged and named in readiness
 * (`backchannel_logout`, its name from before the pass did both: degraded), and tried again a
 * minute later, as is the whole pass when Keycloak cannot list the realms. Never fatal.
 *
 * A realm found aligned is recorded in `records` (realm-alignments.repo.ts) by its id, for this
 * URL and `STEPS_VERSION`; a pass lists the realms in brief and reads none that is recorded so
 * within `RECHECK_AFTER_SECONDS`: a replica's start costs Keycloak one call when the realms are
 * aligned, and the first start after a change of URL or steps aligns each realm once for all
 * replicas (realms in a random order, each looked up again just before: replicas starting
 * together share the work). Without `records`, or while the database fails, every realm is
 * checked, as before the records were kept: a record that cannot be read or written mid-pass
 * leaves the rest of the pass without them (one warning, no wait per realm).
 */
export function createRealmAlignment(deps: {
  adminSession: Pick<AdminSession, 'run'>;
  url: string;
  logger: Logger;
  records?: RealmAlignmentsRepo;
  retryMs?: number;
}) {
  const { adminSession, url, logger, records } = deps;
  const target: AlignmentTarget = { url, stepsVersion: STEPS_VERSION };
  let standing: Standing = { state: 'pending' };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;

  /**
   * The ids of the realms recorded as aligned for this target, forgetting those of realms no
   * longer listed; undefined when the records cannot be read (the database down).
   */
  async function recorded(
    store: RealmAlignmentsRepo,
    listed: { id: string | undefined }[],
  ): Promise<Set<string> | undefined> {
    const ids = new Set(listed.flatMap(({ id }) => (id ? [id] : [])));
    await store.forgetUnlisted(ids, FORGET_AFTER_SECONDS).catch((err: unknown) => {
      logger.warn({ err }, 'realm alignment: records of deleted realms could not be forgotten');
    });
    try {
      return await store.freshIds(target, RECHECK_AFTER_SECONDS);
    } catch (err) {
      logger.warn({ err }, 'realm alignment: its records could not be read; checking every realm');
      return undefined;
    }
  }

  async function pass(): Promise<void> {
    let realms: { id: string | undefined; realm: string }[];
    try {
      realms = await adminSession.run(listRealms);
    } catch (err) {
      logger.warn({ err }, 'realm alignment: realms could not be listed; trying again');
      standing = { state: 'unlisted' };
      return;
    }
    const aligned = records && (await recorded(records, realms));
    // The records are used in this pass only while they answer: if they cannot be read, or one
    // look-up or write fails mid-pass, every realm left is checked and none recorded, as without
    // them (no wait per realm on a database that does not answer).
    let store = aligned && records;
    const dropStore = (err: unknown) => {
      store = undefined;
      logger.warn(
        { err },
        'realm alignment: its records failed; this pass checks every realm left and records none',
      );
    };
    const due = shuffled(realms.filter(({ id }) => !id || !aligned?.has(id)));
    const unset: string[] = [];
    let checked = 0;
    for (const realm of due) {
      if (closed) return;
      // Another replica may have aligned it since the records were read (a start together).
      if (store && realm.id) {
        const fresh = await store
          .isFresh(realm.id, target, RECHECK_AFTER_SECONDS)
          .catch((err: unknown) => {
            dropStore(err);
            return false;
          });
        if (fresh) continue;
      }
      checked++;
      const outcome = await alignRealm(realm.realm);
      if (outcome === 'unset') unset.push(realm.realm);
      if (outcome !== 'aligned' || !store || !realm.id) continue;
      await store.record({ id: realm.id, realm: realm.realm }, target).catch(dropStore);
    }
    logger.info(
      { realms: realms.length, checked, unset: unset.length },
      'realm alignment: pass done',
    );
    standing = unset.length === 0 ? { state: 'done' } : { state: 'partial', unset };
  }

  /**
   * Runs every step on the realm. A step that failed because the realm was deleted since it was
   * listed (another test's, an organization deleted meanwhile) makes the realm `gone`: nothing
   * to align, and nothing to name in readiness for the next minute.
   */
  async function alignRealm(realm: string): Promise<'aligned' | 'unset' | 'gone'> {
    const failures: { step: AlignmentStep; err: unknown }[] = [];
    for (const step of STEPS) {
      try {
        if (await adminSession.run((admin) => step.run(admin, realm, url))) {
          logger.info({ realm, step: step.name }, step.changed);
        }
      } catch (err) {
        failures.push({ step, err });
      }
    }
    if (failures.length === 0) return 'aligned';
    const exists = await adminSession.run((admin) => realmExists(admin, realm)).catch(() => true);
    if (!exists) return 'gone';
    for (const { step, err } of failures) logger.warn({ err, realm, step: step.name }, step.failed);
    return 'unset';
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
    /**
     * Records a realm provisioning made with every step done (realm-admin/provisioning.ts), so
     * that no start checks it before `RECHECK_AFTER_SECONDS`. Never throws (logged).
     */
    async recordAligned(realm: ListedRealm): Promise<void> {
      try {
        await records?.record(realm, target);
      } catch (err) {
        logger.warn(
          { err, realm: realm.realm },
          'realm alignment: a new realm could not be recorded',
        );
      }
    },
    close(): void {
      closed = true;
      clearTimeout(timer);
    },
  };
}

/** The items in a random order (Fisher-Yates). */
function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

export type RealmAlignment = ReturnType<typeof createRealmAlignment>;
