import { ClaimRefused } from './cache.ts';
import { createIpcPeer, type IpcEndpoint, type IpcPeer } from './ipc-peer.ts';
import { createMemoryCache } from './memory-cache.ts';
import { TtlLru } from './ttl-lru.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/**
 * The supervising process's side of what the workers of one gateway share without Redis: one
 * in-memory cache (the login throttle's counters, the single-flight of cold Basic logins, their
 * outcomes), the replica bus (each message relayed to every worker, kept ones held for workers
 * that start later), the last key set Keycloak served each realm and the organizations the
 * workers confirmed. Each worker reaches it through ipc-cache.ts, ipc-bus.ts,
 * auth/bearer/key-set-memory.ts and platform/organization-memory.ts.
 */
export interface IpcHub {
  /** Serves a worker over its IPC channel until it exits; resolves to that channel. */
  attach(worker: IpcEndpoint & { once(event: 'exit', listener: () => void): unknown }): IpcPeer;
  /** Every worker attached now. */
  readonly peers: ReadonlySet<IpcPeer>;
  close(): Promise<void>;
}

/**
 * How far past a claim's expiry the workers are told the shared cache may hold claims: so the
 * hub tells them about once a second while claims keep coming, not once a claim.
 */
const CLAIMS_TOLD_AHEAD_MS = 1000;

/** Creates the hub; `maxEntries` bounds the cache and the kept messages, as MEMORY_CACHE_MAX_ENTRIES. */
export function createIpcHub(options: { maxEntries: number; clock?: Clock }): IpcHub {
  const { clock = systemClock } = options;
  const cache = createMemoryCache({ maxEntries: options.maxEntries, clock });
  const kept = new TtlLru<string>(options.maxEntries, clock);
  const peers = new Set<IpcPeer>();
  // Realm -> key set (public keys, as Keycloak served them to a worker): bounded by the realms
  // Keycloak serves.
  const keySets = new Map<string, string>();
  // Organization id -> what a worker last learned of it (platform/organization-memory.ts),
  // until the time it told: bounded like the cache.
  const organizations = new TtlLru<{ state: string; at: number }>(options.maxEntries, clock);
  /** What the workers were told of `cache.claimsHeldUntil()`: as late, or later. */
  let claimsToldUntil = 0;
  const handlers = {
    'cache.get': (key: string) => cache.get(key),
    'cache.set': (key: string, value: string, ttlMs: number) => cache.set(key, value, ttlMs),
    'cache.delete': (key: string) => cache.delete(key),
    // An absent `by` arrives as null (the channel speaks JSON).
    'cache.increment': (key: string, windowMs: number, by: number | null) =>
      cache.increment(key, windowMs, by ?? undefined),
    // A worker whose own Redis call granted a key checks here whether a sibling claimed it
    // during an outage (fallback-cache.ts) while a claim may be held, so every worker hears of
    // a later expiry before the claimant's answer leaves: a replay is handed to a worker over
    // the same channel, after it.
    // A claim the store cannot take answers its refusal's reason (an error would cross the
    // channel as its message only), which the worker's cache rejects with (ipc-cache.ts).
    'cache.claim': async (key: string, ttlMs: number, owner: string | null) => {
      let granted: boolean;
      try {
        granted = await cache.claim(key, ttlMs, owner ?? undefined);
      } catch (err) {
        if (err instanceof ClaimRefused) return { refused: err.reason };
        throw err;
      }
      if (cache.claimsHeldUntil() > claimsToldUntil) {
        claimsToldUntil = cache.claimsHeldUntil() + CLAIMS_TOLD_AHEAD_MS;
        for (const peer of peers) peer.tell('cache.claimsHeld', claimsToldUntil);
      }
      return granted;
    },
    'cache.claimsHeldUntil': () => claimsToldUntil,
    'cache.counter': (key: string) => cache.counter(key),
    'bus.keep': (key: string, payload: string, ttlSeconds: number) => {
      kept.set(key, payload, clock.now() + ttlSeconds * 1000);
    },
    'bus.kept': (prefix: string) => kept.values(prefix),
    'keys.recall': (realm: string) => keySets.get(realm) ?? null,
    // A worker started during a Keycloak outage verifies with these: ready, as its siblings.
    'keys.held': () => keySets.size > 0,
    // Newer knowledge wins: a database answer asked before a deletion was learned, told after
    // it, does not bring the organization back. Told already expired: only forgets older news.
    'organizations.note': (id: string, state: string, at: number, keptUntil: number) => {
      const held = organizations.get(id);
      if (held !== undefined && held.at > at) return;
      if (keptUntil > clock.now()) organizations.set(id, { state, at }, keptUntil);
      else organizations.delete(id);
    },
    'organizations.recall': (id: string) => organizations.get(id) ?? null,
    // Every worker, the sender included, as Redis' publish does (receivers skip their own).
    'bus.publish': (channel: string, payload: string) => {
      for (const peer of peers) peer.tell('bus.message', channel, payload);
    },
  };
  return {
    peers,
    attach(worker) {
      const peer: IpcPeer = createIpcPeer(worker, {
        ...handlers,
        // Kept for workers that recall it later, and handed to the other workers at once: they
        // adopt it instead of fetching the same set themselves (auth/bearer/jwks.ts).
        'keys.remember': (realm: string, keySet: string, startedAt: number) => {
          keySets.set(realm, keySet);
          for (const other of peers) {
            if (other !== peer) other.tell('keys.fetched', realm, keySet, startedAt);
          }
        },
      });
      peers.add(peer);
      worker.once('exit', () => {
        peers.delete(peer);
        peer.close();
      });
      return peer;
    },
    async close() {
      for (const peer of peers) peer.close();
      peers.clear();
      kept.clear();
      keySets.clear();
      organizations.clear();
      await cache.close();
    },
  };
}
