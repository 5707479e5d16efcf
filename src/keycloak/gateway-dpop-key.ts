import { calculateJwkThumbprint, exportJWK } from 'jose';
import * as oidc from 'openid-client';

/** A proof-maker of the gateway's own key for one realm's grants, and that key's thumbprint. */
export interface GatewayProof {
  handle: oidc.DPoPHandle;
  /** RFC 7638 thumbprint of the key: the `cnf.jkt` of the tokens Keycloak binds to it. */
  thumbprint: string;
}

/**
 * The gateway's own DPoP key (P-256), made once per process when its first grant needs it:
 * never stored, never sent anywhere but as the public half of a proof. Its proofs go with the
 * Basic logins' password grants of a realm whose API client requires bound tokens ("OAuth 2.0
 * DPoP Bound Access Tokens Enabled"; token-client.ts), so that client serves Basic like any
 * other; the tokens stay in this process (a cached
 * login keeps the principal, not the token, so another replica never needs this key).
 */
export function gatewayDpopKey(): {
  handleFor(config: oidc.Configuration): Promise<GatewayProof>;
} {
  let made: Promise<{ keyPair: oidc.CryptoKeyPair; thumbprint: string }> | undefined;
  const handles = new WeakMap<oidc.Configuration, GatewayProof>();
  const key = () =>
    (made ??= oidc.randomDPoPKeyPair('ES256').then(async (keyPair) => ({
      keyPair,
      thumbprint: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey)),
    })));
  return {
    async handleFor(config) {
      const known = handles.get(config);
      if (known) return known;
      const { keyPair, thumbprint } = await key();
      // One handle per realm's configuration: it keeps a nonce Keycloak may send.
      const proof = { handle: oidc.getDPoPHandle(config, keyPair), thumbprint };
      handles.set(config, proof);
      return proof;
    },
  };
}
