import { createHash, randomBytes } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT } from 'jose';

/**
 * A login's DPoP key (RFC 9449): a P-256 private key as a JWK, kept in the credentials file
 * beside the refresh token it binds (mode 0600, the file's lock). Never printed or logged.
 */
export interface DpopKey {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d: string;
}

/** The one algorithm the CLI signs proofs with; a realm that does not list it is not bound. */
export const DPOP_ALGORITHM = 'ES256';

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** A fresh key of its own for one login. */
export async function generateDpopKey(): Promise<DpopKey> {
  const { privateKey } = await generateKeyPair(DPOP_ALGORITHM, { extractable: true });
  const { x, y, d } = await exportJWK(privateKey);
  return { kty: 'EC', crv: 'P-256', x: x!, y: y!, d: d! };
}

/** Whether `value` is a key as {@link generateDpopKey} makes it (as read back from the file). */
export function isDpopKey(value: unknown): value is DpopKey {
  if (typeof value !== 'object' || value === null) return false;
  const key = value as Record<string, unknown>;
  const part = (name: string) => typeof key[name] === 'string' && BASE64URL.test(key[name]);
  return key.kty === 'EC' && key.crv === 'P-256' && ['x', 'y', 'd'].every(part);
}

/** The public half, as a proof's header carries it: never `d`. */
function publicJwkOf({ kty, crv, x, y }: DpopKey) {
  return { kty, crv, x, y };
}

/** The key's JWK SHA-256 thumbprint (RFC 7638): the `cnf.jkt` of the tokens it binds. */
export function thumbprintOf(key: DpopKey): Promise<string> {
  return calculateJwkThumbprint(publicJwkOf(key), 'sha256');
}

/** Imported keys by their public half: one import per key and process, not one per proof. */
const imported = new Map<string, ReturnType<typeof importJWK>>();

/** What one proof is for. */
export interface ProofTarget {
  /** The request's method (`htm`). */
  method: string;
  /** The request's URL; `htu` is it without query or fragment. */
  url: URL | string;
  /** On a call with the token: `ath`, its SHA-256. */
  accessToken?: string;
  /** The server's `DPoP-Nonce`, when it asked for one. */
  nonce?: string;
}

/** A fresh proof (`DPoP` header value) for one request: its own `jti` and `iat`. */
export async function dpopProof(key: DpopKey, target: ProofTarget): Promise<string> {
  const jwk = publicJwkOf(key);
  const id = `${key.x}.${key.y}`;
  let signing = imported.get(id);
  if (signing === undefined) {
    signing = importJWK({ ...key, alg: DPOP_ALGORITHM }, DPOP_ALGORITHM);
    imported.set(id, signing);
  }
  const htu = new URL(target.url);
  htu.search = '';
  htu.hash = '';
  return new SignJWT({
    htm: target.method.toUpperCase(),
    htu: htu.href,
    ...(target.accessToken === undefined ? {} : { ath: sha256(target.accessToken) }),
    ...(target.nonce === undefined ? {} : { nonce: target.nonce }),
  })
    .setProtectedHeader({ alg: DPOP_ALGORITHM, typ: 'dpop+jwt', jwk })
    .setJti(randomBytes(16).toString('base64url'))
    .setIssuedAt()
    .sign(await signing);
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'ascii').digest('base64url');
}

/** An answer as the senders below read it. */
export interface ProofAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/**
 * Sends a request with a fresh proof of `key` (no proof without a key), and once more with a
 * new proof carrying the server's nonce when the answer asks for one (RFC 9449 sections 8 and
 * 9: `use_dpop_nonce` from a token endpoint, or in a resource server's challenge). Once only: a
 * server that asks again is answered by its own refusal.
 */
export async function sendWithProof<A extends ProofAnswer>(
  key: DpopKey | undefined,
  target: ProofTarget,
  send: (proof: string | undefined) => Promise<A>,
): Promise<A> {
  if (key === undefined) return send(undefined);
  const first = await send(await dpopProof(key, target));
  const nonce = first.headers.get('dpop-nonce');
  if (nonce === null || !DPOP_NONCE.test(nonce) || !asksForNonce(first)) return first;
  return send(await dpopProof(key, { ...target, nonce }));
}

/** RFC 9449's nonce: printable ASCII but `"` and `\`; bounded, as it goes into every proof. */
export const DPOP_NONCE = /^[\x21\x23-\x5b\x5d-\x7e]{1,512}$/;

function asksForNonce({ status, headers, text }: ProofAnswer): boolean {
  if (status === 401) {
    return /\berror="use_dpop_nonce"/.test(headers.get('www-authenticate') ?? '');
  }
  if (status !== 400) return false;
  try {
    return (JSON.parse(text) as { error?: unknown } | null)?.error === 'use_dpop_nonce';
  } catch {
    return false;
  }
}
