import { createLocalJWKSet, type JWTVerifyGetKey } from 'jose';
import { unexpectedAnswer } from '../../keycloak/keycloak-failures.ts';

/** A key set as jwks.ts holds it: jose's selection over it, its signature keys' kids, its JSON. */
export interface ReadKeySet {
  select: JWTVerifyGetKey;
  kids: Set<string>;
  body: string;
}

/**
 * Keycloak's answer as a key set: jose's selection over it and its signature keys' `kid`s, or
 * the failure it means.
 */
export function readKeySet(status: number, body: string): ReadKeySet {
  if (status !== 200) throw unexpectedAnswer('key set', status);
  let set: { keys?: unknown } | null;
  try {
    set = JSON.parse(body) as { keys?: unknown } | null;
  } catch {
    throw unexpectedAnswer('key set', status, 'not JSON');
  }
  const keys = set?.keys;
  if (!Array.isArray(keys)) throw unexpectedAnswer('key set', status, 'no "keys"');
  let select: JWTVerifyGetKey;
  try {
    select = createLocalJWKSet(set as Parameters<typeof createLocalJWKSet>[0]);
  } catch {
    throw unexpectedAnswer('key set', status, 'not a key set');
  }
  const kids = new Set<string>();
  for (const key of keys as Array<{ kid?: unknown; use?: unknown }>) {
    if (typeof key.kid === 'string' && (key.use === undefined || key.use === 'sig')) {
      kids.add(key.kid);
    }
  }
  return { body, select, kids };
}

/** A key set read from what was kept or relayed (already checked once), or undefined. */
export function tryReadKeySet(body: string): ReadKeySet | undefined {
  try {
    return readKeySet(200, body);
  } catch {
    return undefined;
  }
}

/**
 * Whether Keycloak answered that the realm does not exist (deleted): its own 404 and error, not
 * any 404 (a proxy in front of Keycloak may answer 404 while Keycloak is away, and an outage
 * must not drop a set).
 */
export function isRealmGone(status: number, body: string): boolean {
  if (status !== 404) return false;
  try {
    return (JSON.parse(body) as { error?: unknown } | null)?.error === 'Realm does not exist';
  } catch {
    return false;
  }
}
