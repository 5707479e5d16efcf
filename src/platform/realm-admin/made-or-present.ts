import { setTimeout as delay } from 'node:timers/promises';

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
 * there within PRESENCE_WAIT_MS, the refusal is a real failure and is thrown as it came.
 */
export async function madeOrPresent(
  make: () => Promise<unknown>,
  isPresent: () => Promise<boolean>,
): Promise<boolean> {
  try {
    await make();
    return true;
  } catch (err) {
    const until = Date.now() + PRESENCE_WAIT_MS;
    for (;;) {
      if (await isPresent()) return false;
      if (Date.now() >= until) throw err;
      await delay(PRESENCE_POLL_MS);
    }
  }
}
