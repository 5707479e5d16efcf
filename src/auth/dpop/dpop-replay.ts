import { hash } from 'node:crypto';
import { ClaimRefused, type Cache } from '../../cache/cache.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import { AuthFailure } from '../auth-failure.ts';
import type { CheckedProof } from './dpop-proof.ts';

/** Remembers each proof's `jti` while its `iat` is in the window of any replica. */
export interface ProofReplayStore {
  /**
   * True the first time this key's proof `jti` is seen inside its window, false on a replay.
   * Rejects with AuthFailure (`proof_store_full`, `proof_key_share`) when the in-process store
   * has no room to remember it: the proof is refused, never taken unrecorded.
   */
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
      try {
        // Owned by the key: in memory, one key flooding fresh proofs is refused past its share
        // rather than filling the store for every other key (memory-cache.ts).
        return await cache.claim(`dpop-jti:${name}`, ttlMs, boundKey);
      } catch (err) {
        if (err instanceof ClaimRefused) throw storeRefusal(err);
        throw err;
      }
    },
  };
}

/**
 * A proof the in-process store could not record: refused, as a proof taken unrecorded could be
 * replayed, and said as it is (the proof is fine; a new one later passes), never as a replay.
 */
function storeRefusal(refused: ClaimRefused): AuthFailure {
  return refused.reason === 'full'
    ? new AuthFailure(
        'dpop',
        'proof_store_full',
        'This gateway holds as many recent DPoP proofs as it can; retry with a new proof shortly.',
        { cause: refused },
      )
    : new AuthFailure(
        'dpop',
        'proof_key_share',
        "This key's recent DPoP proofs take this gateway's share for one key; retry with a new proof shortly.",
        { cause: refused },
      );
}
