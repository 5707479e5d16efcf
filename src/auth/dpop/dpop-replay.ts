import { hash } from 'node:crypto';
import type { Cache } from '../../cache/cache.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import type { CheckedProof } from './dpop-proof.ts';

/** Remembers each proof's `jti` while its `iat` is in the window of any replica. */
export interface ProofReplayStore {
  /** True the first time this key's proof `jti` is seen inside its window, false on a replay. */
  firstUse(boundKey: string, proof: CheckedProof): Promise<boolean>;
}

/**
 * The one-time use of proofs (RFC 9449 section 11.1), through the gateway's cache: Redis when
 * configured, so a proof is accepted once across every replica and worker (`claim` is an
 * atomic `SET key 1 NX PX ttl` there, sent with the other claims of its turn in one script run;
 * the name is the one replicas of before used with their SET NX + INCRBY, so a fleet in the
 * middle of an upgrade still refuses a replay); without Redis the supervising process's or this
 * process's memory. While Redis fails the cache's fallback serves, as it does for every other
 * shared entry: a proof is then accepted once per process (or per gateway, with workers)
 * until Redis answers again. The entry is named by SHA-256 of the key's thumbprint and the
 * `jti` (never the proof) and lives until no replica takes the proof any more, whatever the
 * clock of the one that took it (`CheckedProof.acceptableUntil`).
 */
export function createProofReplayStore(options: { cache: Cache; clock?: Clock }): ProofReplayStore {
  const { cache, clock = systemClock } = options;
  return {
    async firstUse(boundKey, proof) {
      const name = hash('sha256', `${boundKey}\u0000${proof.jti}`, 'base64url');
      const ttlMs = Math.max(1, Math.ceil(proof.acceptableUntil - clock.now()));
      return cache.claim(`dpop-jti:${name}`, ttlMs);
    },
  };
}
