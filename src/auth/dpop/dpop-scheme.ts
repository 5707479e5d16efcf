import type { IncomingMessage } from 'node:http';
import type { Principal } from '../../tenancy/principal.ts';
import { AuthFailure } from '../auth-failure.ts';
import { onlyProof } from './dpop-header.ts';
import type { ProofChecker } from './dpop-proof.ts';
import type { NonceSource } from './dpop-nonce.ts';
import type { ProofReplayStore } from './dpop-replay.ts';

/** The DPoP scheme's part of an `/api` request's authentication (authenticate.ts). */
export interface DpopScheme {
  /** The `algs` of every DPoP challenge: the algorithms a proof may use, space-separated. */
  readonly algs: string;
  /** With server nonces (`DPOP_NONCE`): the one a refused proof is answered with. */
  readonly nonce?: () => string;
  /**
   * Checks the request's one `DPoP` header as the proof of possession of the key the verified
   * token `principal` is bound to, for this request (`path`: as the edge read it), and that it
   * is used the first time (`tokenHash`: the token's SHA-256, base64url, when the caller has
   * it). Rejects with AuthFailure (`dpop`).
   */
  prove(
    req: IncomingMessage,
    path: string,
    token: string,
    principal: Principal,
    tokenHash?: string,
  ): Promise<void>;
}

/**
 * `Authorization: DPoP <token>` (RFC 9449 section 7): a token bound to a key (`cnf.jkt`) and
 * exactly one `DPoP` header whose proof passes `check`, once (`replay`). An unbound token is
 * refused with this scheme (see docs/security-model.md, "DPoP"): a client that believes its
 * token is bound learns at once that it is not, instead of being served as Bearer.
 */
export function createDpopScheme(options: {
  check: ProofChecker;
  replay: ProofReplayStore;
  /** `htuBaseOf(PUBLIC_URL)`: a request's `htu` is this and its path. */
  htuBase: string;
  algorithms: readonly string[];
  /** Server nonces (`DPOP_NONCE`): every proof must carry one `nonces` accepts. */
  nonces?: NonceSource;
}): DpopScheme {
  const { nonces } = options;
  return {
    algs: options.algorithms.join(' '),
    ...(nonces && { nonce: () => nonces.current() }),
    async prove(req, path, token, principal, tokenHash) {
      const boundKey = principal.boundKey;
      if (boundKey === undefined) {
        throw new AuthFailure('dpop', 'bad_token', 'This token is not bound to a key; use Bearer.');
      }
      const proof = onlyProof(req);
      const checked = await options.check(proof, {
        method: req.method ?? '',
        htu: options.htuBase + path,
        accessToken: token,
        accessTokenHash: tokenHash,
        boundKey,
      });
      // Before the replay record: a proof refused for its nonce leaves its `jti` unused.
      if (nonces && !nonces.accepts(checked.nonce)) {
        throw new AuthFailure(
          'dpop',
          'nonce_required',
          'This resource requires the DPoP nonce of its DPoP-Nonce header in the proof.',
        );
      }
      if (!(await options.replay.firstUse(boundKey, checked))) {
        throw new AuthFailure('dpop', 'replayed_proof', 'This DPoP proof was used before.');
      }
    },
  };
}
