import {
  createRefusalRecordLimit,
  type UnrecordedRun,
} from '../auth-proxy/refusal-record-limit.ts';
import type { Clock } from '../time/clock.ts';
import { every, type Periodic } from '../time/every.ts';
import type { AuditEvent } from './audit-writer.ts';

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

/** The action of a record counting the refusals of a window that were not recorded one by one. */
export const SUMMARY_ACTION = 'api.request.summary';

/** What a summary keeps of the refusals it counts (they all had these), in its key's order. */
const KEPT = ['org', 'address', 'credential', 'reason', 'status', 'result'] as const;

export interface RefusalSummaries {
  /** Records `event`, unless it is a refusal past its kind's share of the window. */
  record(event: AuditEvent): void;
  /** Records the summary of every window, over or not; nothing is summarised after it. */
  close(): Promise<void>;
}

/**
 * In front of the writer of `/api` decisions: one address's refusals of one kind (its log,
 * credential kind, reason, status and result code) are recorded one by one up to
 * `REFUSALS_RECORDED_PER_WINDOW` in `REFUSAL_WINDOW_MS`; the rest of that window are counted
 * and recorded as one `api.request.summary` record once it is over (looked for every few
 * seconds), so a flood costs an organization's log a few rows a minute, not one per request,
 * and cannot fill the writer's spool ahead of other callers' records. A decision that admitted
 * its caller is always recorded.
 */
export function summariseRefusals(
  record: (event: AuditEvent) => void,
  clock: Clock,
): RefusalSummaries {
  const limit = createRefusalRecordLimit(clock, {
    intervalMs: REFUSAL_WINDOW_MS,
    recordedPerWindow: REFUSALS_RECORDED_PER_WINDOW,
  });
  // The key is the kept fields as JSON: no separator a client could put in a field, and the
  // summary reads them back from it.
  const summarise = (runs: UnrecordedRun[]) => {
    for (const run of runs) record(summaryOf(run, JSON.parse(run.key) as unknown[]));
  };
  const sweeps: Periodic = every(SWEEP_MS, () => Promise.resolve(summarise(limit.ended())), {
    onError: () => undefined,
  });
  return {
    record(event) {
      if (event.action !== 'api.request' || event.reason === null) {
        record(event);
        return;
      }
      const { recorded, ended } = limit.take(JSON.stringify(KEPT.map((name) => event[name])));
      summarise(ended);
      if (recorded) record(event);
    },
    async close() {
      await sweeps.stop();
      summarise(limit.drain());
    },
  };
}

/** How often windows over are looked for: a summary comes at most this late. */
const SWEEP_MS = 5000;

function summaryOf(run: UnrecordedRun, kept: unknown[]): AuditEvent {
  const [org, address, credential, reason, status, result] = kept as [
    string,
    string | null,
    string | null,
    string | null,
    number | null,
    string | null,
  ];
  return {
    org,
    atMs: run.lastMs,
    action: SUMMARY_ACTION,
    outcome: 'failure',
    actorRealm: null,
    actorId: null,
    actorName: null,
    credential,
    clientId: null,
    jobCredential: null,
    jkt: null,
    method: null,
    route: null,
    path: null,
    workspace: null,
    status,
    result,
    reason,
    address,
    requestId: null,
    details: {
      count: String(run.count),
      first: new Date(run.firstMs).toISOString(),
      last: new Date(run.lastMs).toISOString(),
    },
  };
}
