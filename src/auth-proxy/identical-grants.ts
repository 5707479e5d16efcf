import { createHmac, randomBytes } from 'node:crypto';

/**
 * Identical password grants (one account, password, client and one-time password) in flight in
 * this process, from any address: the first goes on, the others wait until it is settled, then
 * find its refusal in the failed-login memory. Without it, jobs starting together with a stale
 * password each reach Keycloak before the first refusal is remembered, and their failures,
 * counted once by the throttle, are each counted by Keycloak's brute-force detection, which
 * locks the account for its right jobs too. A waiting grant takes no one's throttle decision:
 * it is decided for its own address once it goes on.
 */
export interface IdenticalGrants {
  /**
   * Waits for the grant of `identity` in flight, if there is one (then resolves to a no-op);
   * else makes this one the grant in flight until the returned function is called (at its
   * settlement, or when it goes no further). Calling it again does nothing.
   */
  enter(identity: readonly string[]): Promise<() => void>;
}

export function createIdenticalGrants(): IdenticalGrants {
  // Keys the grants, so no password is held in clear as a key for as long as its grant takes.
  const secret = randomBytes(32);
  const inFlight = new Map<string, Promise<void>>();
  return {
    async enter(identity) {
      const key = createHmac('sha256', secret).update(JSON.stringify(identity)).digest('base64url');
      const ahead = inFlight.get(key);
      if (ahead) {
        await ahead;
        // A right password's grants go on together once one succeeded: only a refusal is shared.
        return () => {};
      }
      let settled = () => {};
      const flight = new Promise<void>((resolve) => (settled = resolve));
      inFlight.set(key, flight);
      return () => {
        if (inFlight.get(key) === flight) inFlight.delete(key);
        settled();
      };
    },
  };
}
