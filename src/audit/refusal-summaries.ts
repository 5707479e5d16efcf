import {
  createRefusalRecordLimit,
  type UnrecordedRun,
} from '../auth-proxy/refusal-record-limit.ts';
import { addressGroupOf } from '../edge/address-group.ts';
import { ANSWER_CUT } from '../http/audit.ts';
import type { Clock } from '../time/clock.ts';
import { every, type Periodic } from '../time/every.ts';
import type { AuditEvent } from './audit-writer.ts';
import { UNSET_FIELDS } from './unset-fields.ts';

/**
 * The window of refusals summarised: a minute, as the back-channel logout's (the refusals
 * of one client over a minute say one thing), short enough that a summary is in the log soon
 * after its flood.
 */
export const REFUSAL_WINDOW_MS = 60_000;

/**
 * Refusals of one kind from one address recorded one by one per window: above the login
 * throttle's 5 wrong passwords of one account (a person's typos are each recorded, the user
 * name they tried included), so only a client that keeps at it is summarised.
 */
export const REFUSALS_RECORDED_PER_WINDOW = 10;

/** The action of a record counting the `/api` refusals of a window not recorded one by one. */
export const API_SUMMARY_ACTION = 'api.request.summary';

/** The action of a record counting the failed token grants of a window not recorded one by one. */
export const GRANT_SUMMARY_ACTION = 'token.grant.summary';

/** The action of a record counting the `/auth` refusals of a window not recorded one by one. */
const AUTH_SUMMARY_ACTION = 'auth.request.summary';

/**
 * The refusals summarised, by their records' action: the action of their summary and what a
 * summary keeps of them (they all had it; it is their kind): the log, address, reason and status
 * of each, and the credential kind and result code of an `/api` or `/auth` decision, the grant
 * type of a token grant. An IPv6 address is kept as its /64 (`2001:db8:1:2::/64`): one host can draw a new
 * address of it for each request, which would otherwise be a new kind each time
 * (edge/address-group.ts).
 */
const SUMMARISED: Record<string, { action: string; kept: (event: AuditEvent) => Kept }> = {
  'api.request': { action: API_SUMMARY_ACTION, kept: decisionKept },
  // A header of made-up tokens on `/auth` is refused at no cost to its sender, as on `/api`.
  'auth.request': { action: AUTH_SUMMARY_ACTION, kept: decisionKept },
  // Not the client, and a grant type only of a closed list: both are what the client sends, and a
  // flood naming a new one in each request would otherwise be a new kind each time.
  'token.grant': {
    action: GRANT_SUMMARY_ACTION,
    kept: ({ org, address, reason, status, details }) => ({
      org,
      address: address === null ? null : addressGroupOf(address),
      reason,
      status,
      details: { grantType: grantKindOf(details.grantType) },
    }),
  },
};

/** What a summary keeps of the refusals of a request it counts (`/api`'s, `/auth`'s). */
function decisionKept({ org, address, credential, reason, status, result }: AuditEvent): Kept {
  return {
    org,
    address: address === null ? null : addressGroupOf(address),
    credential,
    reason,
    status,
    result,
  };
}

/** The actions of summaries. */
export const SUMMARY_ACTIONS: readonly string[] = Object.values(SUMMARISED).map((s) => s.action);

type Kept = Partial<AuditEvent> & Pick<AuditEvent, 'org'>;

/** The grant types Keycloak's token endpoint knows; any other is summarised as `other`. */
const GRANT_TYPES: ReadonlySet<string> = new Set([
  'password',
  'refresh_token',
  'client_credentials',
  'authorization_code',
  'urn:ietf:params:oauth:grant-type:token-exchange',
  'urn:ietf:params:oauth:grant-type:device_code',
  'urn:ietf:params:oauth:grant-type:uma-ticket',
  'urn:openid:params:grant-type:ciba',
]);

function grantKindOf(grantType: string | string[] | undefined): string {
  return typeof grantType === 'string' && GRANT_TYPES.has(grantType) ? grantType : 'other';
}

export interface RefusalSummaries {
  /** Records `event`, unless it is a refusal past its kind's share of the window. */
  record(event: AuditEvent): void;
  /**
   * Records the summaries of `org`'s log now, their windows over or not: before an organization
   * is made again under the id, whose records must not follow its own.
   */
  closeLog(org: string): void;
  /** Records the summary of every window, over or not; nothing is summarised after it. */
  close(): Promise<void>;
}

/**
 * In front of the writer of `/api` decisions, `/auth` refusals and token grants: one address's refusals of one
 * kind (`SUMMARISED`) are recorded one by one up to `REFUSALS_RECORDED_PER_WINDOW` in
 * `REFUSAL_WINDOW_MS`; the rest of that window are counted and recorded as one summary record
 * once it is over (looked for every few seconds), so a flood costs an organization's log a few
 * rows a minute, not one per request, and cannot fill the writer's spool ahead of other callers'
 * records. A decision that admitted its caller (its answer cut too: `ANSWER_CUT`), a grant that
 * succeeded, is always recorded.
 */
export function summariseRefusals(
  record: (event: AuditEvent) => void,
  clock: Clock,
): RefusalSummaries {
  const limit = createRefusalRecordLimit(clock, {
    intervalMs: REFUSAL_WINDOW_MS,
    recordedPerWindow: REFUSALS_RECORDED_PER_WINDOW,
  });
  // The key is the summary's action and the kept fields as JSON: no separator a client could
  // put in a field, and the summary reads them back from it.
  const summarise = (runs: UnrecordedRun[]) => {
    for (const run of runs) record(summaryOf(run, JSON.parse(run.key) as [string, Kept]));
  };
  const sweeps: Periodic = every(SWEEP_MS, () => Promise.resolve(summarise(limit.ended())), {
    onError: () => undefined,
  });
  return {
    record(event) {
      const summarised = SUMMARISED[event.action];
      if (summarised === undefined || event.reason === null || event.reason === ANSWER_CUT) {
        record(event);
        return;
      }
      const { recorded, ended } = limit.take(
        JSON.stringify([summarised.action, summarised.kept(event)]),
      );
      summarise(ended);
      if (recorded) record(event);
    },
    closeLog(org) {
      summarise(limit.drain((key) => (JSON.parse(key) as [string, Kept])[1].org === org));
    },
    async close() {
      await sweeps.stop();
      summarise(limit.drain());
    },
  };
}

/** How often windows over are looked for: a summary comes at most this late. */
const SWEEP_MS = 5000;

function summaryOf(run: UnrecordedRun, [action, kept]: [string, Kept]): AuditEvent {
  return {
    atMs: run.lastMs,
    outcome: 'failure',
    ...UNSET_FIELDS,
    ...kept,
    action,
    details: {
      ...kept.details,
      count: String(run.count),
      first: new Date(run.firstMs).toISOString(),
      last: new Date(run.lastMs).toISOString(),
    },
  };
}
