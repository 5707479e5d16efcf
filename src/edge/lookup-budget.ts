import { TtlLru } from '../cache/ttl-lru.ts';
import type { Clock } from '../time/clock.ts';
import { addressGroupOf } from './address-group.ts';

/**
 * How many database lookups a process spends on what any client names, and one client's part:
 * each worker process (`WORKERS`) has its own budget, so a replica spends up to `WORKERS` times it.
 */
export interface LookupLimits {
  /** Lookups per second (and burst) of the process (each worker has its own). */
  perSecond: number;
  /** Of those, what one client may always spend (its share): an address, an IPv6 host by its /64. */
  clientPerSecond: number;
  /** Past its share, a client spends the process's lookups only while this many are left. */
  keptForOthers: number;
  /** How many clients' shares are kept at once. */
  maxClients: number;
}

/** The lookups of a process (a worker), spent by client. */
export interface LookupBudget {
  /**
   * One lookup for `client` (its address; undefined: none known, the process's only): within
   * its share, or from what the others can spare. False: none left for it now.
   */
  take(client: string | undefined): boolean;
}

/** A client's bucket is forgotten after this idle time (it is full again by then). */
const CLIENT_IDLE_MS = 60_000;

/**
 * The database lookups a process spends on ids any client can make up (an organization's, a
 * token's session), so that a flood of made-up ones from one address costs the database a
 * bounded rate and cannot spend the lookups of everyone else: one client (its address by its
 * group, address-group.ts: an IPv6 host that takes a new address of its /64 for each id is
 * still one) may always spend its share, and more only while `keptForOthers` are left.
 */
export function createLookupBudget(limits: LookupLimits, clock: Clock): LookupBudget {
  const now = () => clock.now();
  const budget = createTokenBucket(limits.perSecond, now);
  const clientBudgets = new TtlLru<TokenBucket>(limits.maxClients, clock);
  return {
    take(client) {
      if (client === undefined) return budget.take();
      const group = addressGroupOf(client);
      let share = clientBudgets.get(group);
      if (share === undefined) {
        share = createTokenBucket(limits.clientPerSecond, now);
        clientBudgets.set(group, share, now() + CLIENT_IDLE_MS);
      }
      return share.take() ? budget.take() : budget.take(limits.keptForOthers);
    },
  };
}

interface TokenBucket {
  /** Takes a token if more than `keep` are left. */
  take(keep?: number): boolean;
}

/**
 * A token bucket: `take()` succeeds at most `perSecond` times a second, with that as burst. The
 * clock is the wall clock: one stepped back (NTP, a VM restored) refills nothing for the step,
 * and takes nothing either (time never runs backwards for the bucket), so it goes on from where
 * it was; read as negative time, two minutes back left it 60,000 lookups short.
 */
function createTokenBucket(perSecond: number, now: () => number): TokenBucket {
  let tokens = perSecond;
  let last = now();
  return {
    take(keep = 0): boolean {
      const at = now();
      tokens = Math.min(perSecond, tokens + (Math.max(0, at - last) * perSecond) / 1000);
      last = at;
      if (tokens < keep + 1) return false;
      tokens -= 1;
      return true;
    },
  };
}
