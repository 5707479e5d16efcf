import { createHmac, randomBytes } from 'node:crypto';

/**
 * Identical password grants (one account, password, client and one-time password) in flight in
 * this process, from any address: one goes on, the others wait until it is settled, then find
 * its refusal in the failed-login memory. Without it, jobs starting together with a stale
 * password each reach Keycloak before the first refusal is remembered, and their failures,
 * counted once by the throttle, are each counted by Keycloak's brute-force detection, which
 * locks the account for its right jobs too. A waiting grant takes no one's throttle decision:
 * it is decided for its own address once it goes on.
 */
export interface IdenticalGrants {
  /**
   * This grant's turn among the grants of `identity`: at once the one in flight when none is;
   * else, once the one in flight leaves, `answered` when it left an answer to share, or the
   * next one in flight (one waiting grant, in order: the others wait on it) when it did not.
   * `gone` when its client left (`gone` aborted) first, `overdue` when it waited `maxWaitMs`.
   */
  enter(identity: readonly string[], gone: AbortSignal): Promise<GrantTurn>;
}

export type GrantTurn =
  | {
      kind: 'inFlight';
      /**
       * Ends this grant's flight: `shared` when its answer is there for an identical grant to
       * find (a token, or a refusal the failed-login memory keeps). Calling it again does
       * nothing.
       */
      leave: (shared: boolean) => void;
    }
  | { kind: 'answered' | 'gone' | 'overdue' };

export interface IdenticalGrantsOptions {
  /** The longest a grant waits for the ones ahead of it: as long as one grant may take. */
  maxWaitMs: number;
}

interface Flight {
  /** The grants waiting, in order of arrival; each resolved with its turn exactly once. */
  waiting: Array<(turn: GrantTurn) => void>;
}

export function createIdenticalGrants(options: IdenticalGrantsOptions): IdenticalGrants {
  // Keys the grants, so no password is held in clear as a key for as long as its grant takes.
  const secret = randomBytes(32);
  const flights = new Map<string, Flight>();

  /** `flight`'s turn given to a grant: left once, then the next one's turn, or the answer's. */
  function inFlight(key: string, flight: Flight): GrantTurn {
    let left = false;
    return {
      kind: 'inFlight',
      leave: (shared) => {
        if (left) return;
        left = true;
        if (shared) {
          flights.delete(key);
          for (const wake of flight.waiting.splice(0)) wake({ kind: 'answered' });
          return;
        }
        // Nothing to find yet: identical grants still reach Keycloak one at a time.
        const next = flight.waiting.shift();
        if (next) next(inFlight(key, flight));
        else flights.delete(key);
      },
    };
  }

  return {
    enter(identity, gone) {
      if (gone.aborted) return Promise.resolve({ kind: 'gone' });
      const key = createHmac('sha256', secret).update(JSON.stringify(identity)).digest('base64url');
      const ahead = flights.get(key);
      if (!ahead) {
        const flight: Flight = { waiting: [] };
        flights.set(key, flight);
        return Promise.resolve(inFlight(key, flight));
      }
      return new Promise<GrantTurn>((resolve) => {
        const wake = (turn: GrantTurn) => {
          clearTimeout(timer);
          gone.removeEventListener('abort', onGone);
          resolve(turn);
        };
        // Out of the line, so the turn is never handed to a grant no one waits for.
        const stop = (kind: 'gone' | 'overdue') => {
          const at = ahead.waiting.indexOf(wake);
          if (at >= 0) ahead.waiting.splice(at, 1);
          wake({ kind });
        };
        const onGone = () => stop('gone');
        const timer = setTimeout(() => stop('overdue'), options.maxWaitMs);
        gone.addEventListener('abort', onGone, { once: true });
        ahead.waiting.push(wake);
      });
    },
  };
}
