import type { Router } from 'express';
import { listenerRouter } from '../http/listener-router.ts';
import type { JSONWebKeySet } from 'jose';

/** Where the public keys of audit checkpoints are published (a JWKS, RFC 7517), without credentials. */
export const AUDIT_KEYS_PATH = '/.well-known/audit-keys';

/** How long a client may keep the set: a key rotated in is seen within this (and the server's ten seconds). */
const MAX_AGE_SECONDS = 300;

/**
 * The key set at `AUDIT_KEYS_PATH`, on both listeners: an auditor fetches it from the gateway
 * (not from an export) and verifies exports with it (`realmgate audit verify --keys`). A
 * database that does not answer is the error handler's 503.
 */
export function auditKeysRouter(keys: () => Promise<JSONWebKeySet>): Router {
  const router = listenerRouter();
  router.get(AUDIT_KEYS_PATH, (_req, res, next) => {
    keys().then((set) => {
      res.setHeader('cache-control', `public, max-age=${MAX_AGE_SECONDS}`);
      res.type('application/jwk-set+json').send(JSON.stringify({ keys: set.keys }));
    }, next);
  });
  return router;
}
