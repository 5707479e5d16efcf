import type { IncomingMessage } from 'node:http';
import { invalidProof } from './dpop-proof.ts';

/**
 * The value of the request's one `DPoP` header, the same rule at the token endpoint and on
 * `/api`: several, or an empty one, are refused (AuthFailure `bad_proof`), since a peer that
 * takes another of them than the one checked (Keycloak takes a second after an empty first)
 * would judge a proof the gateway never saw. None: refused when `required`, else undefined.
 * Read from the raw header list (names as sent, values as the parser trimmed them) rather than
 * `headersDistinct`, which builds an array for every header of the request.
 */
export function onlyProof(req: IncomingMessage, required: false): string | undefined;
export function onlyProof(req: IncomingMessage, required?: true): string;
export function onlyProof(req: IncomingMessage, required = true): string | undefined {
  const raw = req.rawHeaders;
  let proof: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 4 || name.toLowerCase() !== 'dpop') continue;
    if (proof !== undefined) throw invalidProof('Exactly one DPoP proof header is allowed.');
    proof = raw[i + 1]!;
  }
  if (proof === undefined) {
    if (!required) return undefined;
    throw invalidProof('A DPoP proof header is required with the DPoP scheme.');
  }
  proof = proof.trim();
  if (proof === '') throw invalidProof('The DPoP proof header is empty.');
  return proof;
}
