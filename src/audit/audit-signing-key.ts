import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, type JSONWebKeySet, type JWK } from 'jose';
import type { Knex } from 'knex';
import { ed25519PrivateKeyOf, ed25519PublicKeysOf } from '../config/ed25519-keys.ts';
import type { Clock } from '../time/clock.ts';
import { CHECKPOINT_ALG, checkpointSigner, type CheckpointSigner } from './audit-checkpoints.ts';

export const KEYS_TABLE = 'audit_signing_keys';

/**
 * How long the published key set is answered from memory: a public path must not cost a query
 * each, and a replica's new key is published by every other within this.
 */
const KEYS_FRESH_MS = 10_000;

/** A public key as published: its thumbprint as `kid`, for signatures (`use`) with EdDSA. */
async function publishedJwkOf(publicKey: KeyObject): Promise<JWK & { kid: string }> {
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  return { ...jwk, kid, alg: CHECKPOINT_ALG, use: 'sig' };
}

/**
 * The key this process signs checkpoints with: `AUDIT_SIGNING_KEY` (every replica the same),
 * else one made now for this process alone and never stored, so that no private key sits in
 * the database. Either way its public key is added to `audit_signing_keys`, which every replica
 * without `AUDIT_SIGNING_KEY` publishes (`publishedKeys`): each checkpoint of any replica, old or
 * new, verifies with the published set.
 */
export async function openCheckpointSigner(deps: {
  db: Knex;
  clock: Clock;
  signingKey: string | undefined;
}): Promise<CheckpointSigner> {
  const privateKey =
    deps.signingKey === undefined
      ? generateKeyPairSync('ed25519').privateKey
      : ed25519PrivateKeyOf(deps.signingKey);
  const publicJwk = await publishedJwkOf(createPublicKey(privateKey));
  await deps
    .db(KEYS_TABLE)
    .insert({
      kid: publicJwk.kid,
      jwk: JSON.stringify(publicJwk),
      created_at: new Date(deps.clock.now()),
    })
    .onConflict('kid')
    .ignore();
  return checkpointSigner(privateKey, publicJwk);
}

/**
 * The public keys checkpoints may be signed with. With `AUDIT_SIGNING_KEY` (`signingKey`): its
 * own and `AUDIT_SIGNING_PREVIOUS_KEYS` (keys rotated out), and nothing the database holds: the
 * database is what the signatures guard against, and whoever can write it could add a key of
 * their own to `audit_signing_keys` and sign a rewritten log with it. Without it: every key a
 * process signed with (`audit_signing_keys`) and the previous keys, at most ten seconds old: a
 * public path must not cost a query each. `{ current: true }` reads them now: an export must
 * name the key of a checkpoint that a replica started seconds ago signed.
 */
export function publishedKeys(deps: {
  db: Knex;
  clock: Clock;
  signingKey: string | undefined;
  previousKeys: string | undefined;
}): (read?: { current: true }) => Promise<JSONWebKeySet> {
  const previous = Promise.all(
    deps.previousKeys === undefined
      ? []
      : ed25519PublicKeysOf(deps.previousKeys).map(publishedJwkOf),
  );
  if (deps.signingKey !== undefined) {
    const own = publishedJwkOf(createPublicKey(ed25519PrivateKeyOf(deps.signingKey)));
    const configured = Promise.all([previous, own]).then(([keys, key]) => keySetOf([...keys, key]));
    return () => configured;
  }
  let cached: { keys: JSONWebKeySet; until: number } | undefined;
  return async (read) => {
    const now = deps.clock.now();
    if (cached && now < cached.until && !read?.current) return cached.keys;
    const rows: { jwk: unknown }[] = await deps.db(KEYS_TABLE).orderBy('created_at').select('jwk');
    const stored = rows.map(({ jwk }) => (typeof jwk === 'string' ? JSON.parse(jwk) : jwk) as JWK);
    cached = { keys: keySetOf([...(await previous), ...stored]), until: now + KEYS_FRESH_MS };
    return cached.keys;
  };
}

/** A key set of `jwks`, each `kid` once (the last given wins). */
function keySetOf(jwks: JWK[]): JSONWebKeySet {
  const byKid = new Map<string, JWK>();
  for (const jwk of jwks) byKid.set(jwk.kid!, jwk);
  return { keys: [...byKid.values()] };
}
