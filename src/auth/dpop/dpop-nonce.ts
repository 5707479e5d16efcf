import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { systemClock, type Clock } from '../../time/clock.ts';

/**
 * The server nonces of RFC 9449 section 9 (`DPOP_NONCE`): a proof must carry the current one,
 * so a key stolen for a moment cannot sign proofs for later. Each nonce is the HMAC of its time
 * slot under a key every replica derives from the same secret, so every replica and worker
 * issues and accepts the same nonces with nothing shared at run time: the current slot's, and
 * the previous one's (a client that learnt a nonce just before the slot turned). The secret is
 * the gateway's own: a secret Keycloak also holds (the `realmgate-gateway` client's, in every
 * realm) would let whoever reads it in any realm compute every organization's nonces ahead.
 */
export interface NonceSource {
  /** The nonce a client is told to use now (`DPoP-Nonce`). */
  current(): string;
  /** Whether `nonce` (a proof's claim, any type) is the current slot's or the previous one's. */
  accepts(nonce: unknown): boolean;
}

export function createNonceSource(options: {
  /** The gateway's own secret every replica has (`REALMGATE_CACHE_SECRET`); never used as it is. */
  secret: string;
  /** The length of a slot: a nonce is accepted for one to two of them. */
  slotSeconds: number;
  clock?: Clock;
}): NonceSource {
  const { clock = systemClock } = options;
  // Its own key (HKDF, a label of its own): the secret also keys the cache's names.
  const key = Buffer.from(hkdfSync('sha256', options.secret, '', 'realmgate DPoP nonce key', 32));
  const slotMs = options.slotSeconds * 1000;
  /** The last slot's nonces, computed once per slot. */
  let slot = -1;
  let nonces: [current: Buffer, previous: Buffer] = [Buffer.alloc(0), Buffer.alloc(0)];

  function noncesNow(): [Buffer, Buffer] {
    const now = Math.floor(clock.now() / slotMs);
    if (now !== slot) {
      slot = now;
      nonces = [nonceOf(key, now), nonceOf(key, now - 1)];
    }
    return nonces;
  }

  return {
    current: () => noncesNow()[0].toString('latin1'),
    accepts(nonce) {
      // The alphabet first: latin1 keeps a character's low byte only, so a wider one could
      // pass for the nonce's.
      if (typeof nonce !== 'string' || !NONCE_SHAPE.test(nonce)) return false;
      const given = Buffer.from(nonce, 'latin1');
      return noncesNow().some((known) => timingSafeEqual(known, given));
    },
  };
}

/** 128 bits, base64url: 22 characters, within RFC 9449's nonce alphabet. */
const NONCE_LENGTH = 22;
const NONCE_SHAPE = new RegExp(`^[\\w-]{${NONCE_LENGTH}}$`);

function nonceOf(key: Buffer, slot: number): Buffer {
  const mac = createHmac('sha256', key).update(`slot ${slot}`).digest('base64url');
  return Buffer.from(mac.slice(0, NONCE_LENGTH), 'latin1');
}
