import { setTimeout as delay } from 'node:timers/promises';
import { httpStatusOf } from '../../keycloak/admin-client.ts';

/**
 * How long a refused step waits for its twin's work to show. Keycloak refuses the loser of a
 * race as the winner's transaction commits, and a loaded Keycloak was seen answering "no such
 * realm" to the loser's look right after: the winner's realm showed a moment later.
 */
const PRESENCE_WAIT_MS = 5_000;
const PRESENCE_POLL_MS = 250;

/**
 * Runs a Keycloak step that makes something (a realm, a role, a mapper) and resolves to whether
 * this call made it. A refused step counts as done when what it was to make exists afterwards:
 * a concurrent twin (another replica, a client's retry) that made it first leaves Keycloak
 * refusing this one with 409, or with 400 "Database operation failed" or 500 when both passed
 * Keycloak's own check, and the thing being there is all the caller wanted. When it is not
 * there within PRESENCE_WAIT_MS, the refusal is a real failure and is thrown as it came. A
 * refusal no twin can cause (403, a 400 about the request itself) is thrown at once: it will
 * never turn into "present", and realm alignment would wait 5 s per realm and pass for nothing.
 */
export async function madeOrPresent(
  make: () => Promise<unknown>,
  isPresent: () => Promise<boolean>,
): Promise<boolean> {
  try {
    await make();
    return true;
  } catch (err) {
    if (!couldBeTwins(err)) throw err;
    const until = Date.now() + PRESENCE_WAIT_MS;
    for (;;) {
      if (await isPresent()) return false;
      if (Date.now() >= until) throw err;
      await delay(PRESENCE_POLL_MS);
    }
  }
}

/** Keycloak's words when both twins passed its own check and the database refused the second. */
const DATABASE_FAILED = 'Database operation failed';

/**
 * Whether a twin's work may explain the refusal: a conflict (409), the database refusing the
 * second of two (400 `Database operation failed`, or a 5xx), or no answer read at all (a
 * timeout, a connection reset, a 5xx the client layer translated: the step itself may have
 * been made).
 */
function couldBeTwins(err: unknown): boolean {
  const status = httpStatusOf(err);
  if (status === undefined || status === 409 || status >= 500) return true;
  if (status !== 400) return false;
  const data = (err as { responseData?: { errorMessage?: unknown; error?: unknown } }).responseData;
  return data?.errorMessage === DATABASE_FAILED || data?.error === DATABASE_FAILED;
}
