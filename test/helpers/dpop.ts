import { createHash, randomUUID } from 'node:crypto';
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
} from 'jose';

/** A client's DPoP key: the private half signs proofs, the public half travels in them. */
export interface DpopKey {
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
  /** RFC 7638 thumbprint: the `cnf.jkt` of the tokens bound to it. */
  thumbprint: string;
}

/** A new key pair, as a DPoP client makes one (P-256 by default). */
export async function dpopKey(alg = 'ES256'): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return { alg, privateKey, publicJwk, thumbprint: await calculateJwkThumbprint(publicJwk) };
}

/** What a proof speaks for, and anything a test wants otherwise. */
export interface ProofOptions {
  method: string;
  url: string;
  /** The access token of an API call (`ath`); none on a token request. */
  accessToken?: string;
  /** Epoch seconds; now by default. */
  iat?: number;
  jti?: string;
  /** Header members to add or replace (`undefined` removes one). */
  header?: Record<string, unknown>;
  /** Claims to add or replace (`undefined` removes one). */
  claims?: Record<string, unknown>;
}

/** A DPoP proof (RFC 9449 section 4.2) signed by `key`, as a client makes one per request. */
export async function dpopProof(key: DpopKey, options: ProofOptions): Promise<string> {
  const claims: Record<string, unknown> = {
    jti: options.jti ?? randomUUID(),
    htm: options.method,
    htu: options.url,
    iat: options.iat ?? Math.floor(Date.now() / 1000),
    ...(options.accessToken === undefined ? {} : { ath: athOf(options.accessToken) }),
    ...options.claims,
  };
  const header = { alg: key.alg, typ: 'dpop+jwt', jwk: key.publicJwk, ...options.header };
  return new SignJWT(withoutUndefined(claims))
    .setProtectedHeader(withoutUndefined(header) as { alg: string })
    .sign(key.privateKey);
}

/** A form's answer through the gateway (`postForm`), with the proof it went with. */
export interface FormAnswer {
  status: number;
  /** The JSON answer; `{}` for an empty body. */
  json: Record<string, unknown>;
  headers: Headers;
  /** The `DPoP` header sent, if any. */
  proof?: string;
}

/**
 * POSTs a form (a token, refresh or revocation request) to `url`, an address under the
 * gateway's `PUBLIC_URL`, through the gateway listening at `gatewayUrl` (a replica), with a
 * proof of `proofKey` for `url` when given.
 */
export async function postForm(
  gatewayUrl: string,
  url: string,
  body: string,
  proofKey?: DpopKey,
): Promise<FormAnswer> {
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
  };
  if (proofKey) headers.dpop = await dpopProof(proofKey, { method: 'POST', url });
  const res = await fetch(`${gatewayUrl}${new URL(url).pathname}`, {
    method: 'POST',
    headers,
    body,
  });
  const text = await res.text();
  return {
    status: res.status,
    json: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>,
    headers: res.headers,
    ...(headers.dpop === undefined ? {} : { proof: headers.dpop }),
  };
}

/** base64url(SHA-256(token)): a proof's `ath`. */
export function athOf(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

/** A compact JWS-shaped string of raw parts, for proofs no library would sign. */
export function rawJws(header: string, payload: string, signature = 'c2ln'): string {
  const part = (text: string) => Buffer.from(text).toString('base64url');
  return `${part(header)}.${part(payload)}.${signature}`;
}

function withoutUndefined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}
