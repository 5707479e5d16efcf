import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { decodeProtectedHeader } from 'jose';
import { AuthFailure } from '../auth/auth-failure.ts';
import { onlyProof } from '../auth/dpop/dpop-header.ts';
import { rsaKeyTooShort, weakKeyReason } from '../auth/dpop/dpop-key-strength.ts';
import { sendTokenError, type Replacement } from './grant-answer.ts';

/** Keycloak's own words for a refused proof, so clients need no new case (an example). */
export const DPOP_PROOF_KEY_REFUSAL = {
  status: 400,
  error: 'invalid_dpop_proof',
  description: rsaKeyTooShort(1024),
} as const satisfies Replacement;

/**
 * The token endpoint's step of which keys may sign DPoP proofs (auth-steps.ts): a proof whose
 * `alg` is not among `DPOP_ALGORITHMS`, or whose key is too weak (dpop-key-strength.ts), is
 * refused before Keycloak binds a token to its key, which every `/api` call would then refuse;
 * so are several `DPoP` headers, or an empty one (dpop-header.ts), which would let Keycloak bind
 * one this step never read. Only this is judged here: anything else about the proof (no proof,
 * one that cannot be read, its signature and claims) is Keycloak's to answer.
 */
export function guardDpopProofKey(algorithms: readonly string[]): RequestHandler {
  const allowed = new Set(algorithms);
  return (req, res, next) => {
    const refusal = refusalOf(req, allowed);
    if (refusal === undefined) {
      next();
      return;
    }
    sendTokenError(res, { ...DPOP_PROOF_KEY_REFUSAL, description: refusal });
  };
}

function refusalOf(req: IncomingMessage, allowed: ReadonlySet<string>) {
  let proof: string | undefined;
  try {
    proof = onlyProof(req, false);
  } catch (err) {
    if (err instanceof AuthFailure) return err.publicMessage;
    throw err;
  }
  if (proof === undefined) return undefined;
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(proof);
  } catch {
    return undefined;
  }
  if (typeof header.alg === 'string' && !allowed.has(header.alg)) {
    return `The DPoP proof's "alg" is not one of ${[...allowed].join(', ')}.`;
  }
  const { jwk } = header;
  return typeof jwk === 'object' && jwk !== null ? weakKeyReason(jwk) : undefined;
}
