import { randomUUID } from 'node:crypto';
import { exportPKCS8, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';
import { claimsOf, keycloakAdmin, uniqueId } from './keycloak.ts';
import { testEnv } from './test-env.ts';

/** A key of a realm's published key set, as Keycloak serves it. */
export interface RealmJwk {
  kid: string;
  kty: string;
  use?: string;
  n?: string;
}

/** The `kid`s of the realm's published signature keys, straight from Keycloak. */
export async function publishedKids(realm: string): Promise<string[]> {
  const res = await fetch(`${testEnv().keycloakUrl}/realms/${realm}/protocol/openid-connect/certs`);
  const { keys } = (await res.json()) as { keys: RealmJwk[] };
  return keys.filter((key) => key.use !== 'enc').map((key) => key.kid);
}

async function realmIdOf(realm: string): Promise<string> {
  const representation = await (await keycloakAdmin()).realms.findOne({ realm });
  if (!representation?.id) throw new Error(`realm ${realm} not found`);
  return representation.id;
}

/** A key provider of a realm (a Keycloak component), and the kid of the key it holds. */
export interface KeyProvider {
  realm: string;
  componentId: string;
  kid: string;
}

/** An RSA key whose private half the test holds: it can sign tokens the gateway never saw. */
export interface HeldKey extends KeyProvider {
  privateKey: CryptoKey;
}

/**
 * Imports a fresh RSA key pair into the realm as an `rsa` key provider, below Keycloak's own
 * key (which therefore keeps signing the realm's tokens), as a key that leaks would be.
 */
export async function importRsaKey(realm: string): Promise<HeldKey> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await importRsaPem(realm, await exportPKCS8(privateKey))), privateKey };
}

/** Imports an RSA private key (PKCS #8 PEM) into the realm as `importRsaKey` does. */
export async function importRsaPem(realm: string, pem: string): Promise<KeyProvider> {
  const admin = await keycloakAdmin();
  const { id } = await admin.components.create({
    realm,
    name: uniqueId('test-imported-rsa-'),
    providerId: 'rsa',
    providerType: 'org.keycloak.keys.KeyProvider',
    parentId: await realmIdOf(realm),
    config: {
      priority: ['1'],
      enabled: ['true'],
      active: ['true'],
      algorithm: ['RS256'],
      privateKey: [pem],
    },
  });
  return { realm, componentId: id, kid: await kidOf(realm, id) };
}

/** Adds a Keycloak-generated RSA key that outranks the realm's current one (a rotation). */
export async function addGeneratedRsaKey(realm: string, priority: number): Promise<KeyProvider> {
  const admin = await keycloakAdmin();
  const { id } = await admin.components.create({
    realm,
    name: uniqueId('test-rotated-rsa-'),
    providerId: 'rsa-generated',
    providerType: 'org.keycloak.keys.KeyProvider',
    parentId: await realmIdOf(realm),
    config: {
      priority: [String(priority)],
      enabled: ['true'],
      active: ['true'],
      algorithm: ['RS256'],
      keySize: ['2048'],
    },
  });
  return { realm, componentId: id, kid: await kidOf(realm, id) };
}

/** The realm's own RS256 key provider, the one that signs its tokens from its creation. */
export async function signingKeyProvider(realm: string): Promise<KeyProvider> {
  const admin = await keycloakAdmin();
  const { active, keys } = await admin.realms.getKeys({ realm });
  const key = active?.RS256;
  const metadata = keys?.find((k) => k.kid === key);
  if (!key || !metadata?.providerId) throw new Error(`no RS256 signing key in ${realm}`);
  return { realm, componentId: metadata.providerId, kid: key };
}

async function kidOf(realm: string, componentId: string | undefined): Promise<string> {
  const admin = await keycloakAdmin();
  const key = (await admin.realms.getKeys({ realm })).keys?.find(
    (k) => k.providerId === componentId,
  );
  if (!key?.kid) throw new Error(`no key of provider ${componentId} in ${realm}`);
  return key.kid;
}

/** Changes a key provider as the console's Keys tab does: passive (`active: false`) or disabled. */
export async function setKeyProvider(
  provider: KeyProvider,
  flags: { active?: boolean; enabled?: boolean },
): Promise<void> {
  const admin = await keycloakAdmin();
  const component = await admin.components.findOne({
    realm: provider.realm,
    id: provider.componentId,
  });
  if (!component) throw new Error(`no component ${provider.componentId}`);
  const config = { ...component.config };
  if (flags.active !== undefined) config.active = [String(flags.active)];
  if (flags.enabled !== undefined) config.enabled = [String(flags.enabled)];
  await admin.components.update(
    { realm: provider.realm, id: provider.componentId },
    { ...component, config },
  );
}

/** Removes a key provider (its key leaves the published set). */
export async function removeKeyProvider(provider: KeyProvider): Promise<void> {
  const admin = await keycloakAdmin();
  await admin.components.del({ realm: provider.realm, id: provider.componentId });
}

/**
 * Access-token claims of `realm` granting `roles` in its workspaces, issued now (a new `jti`
 * each call). Subject and session are those of the `genuine` token's login, so the token would
 * also pass an introspection by Keycloak.
 */
export function loginClaims(genuine: string, realm: string, roles: string[]): JWTPayload {
  const { sub, sid, azp, preferred_username } = claimsOf(genuine);
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: `${testEnv().publicUrl}/auth/realms/${realm}`,
    sub: String(sub),
    sid,
    azp,
    preferred_username,
    typ: 'Bearer',
    iat: now,
    exp: now + 300,
    jti: randomUUID(),
    resource_access: { [`${realm}-workspaces`]: { roles } },
  };
}

/**
 * A token of a real login's subject and session, granting `roles` in the organization's
 * workspaces, signed with `key`: a token the gateway has never seen, each call.
 */
export function signedToken(key: HeldKey, genuine: string, roles: string[]): Promise<string> {
  return new SignJWT(loginClaims(genuine, key.realm, roles))
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: key.kid })
    .sign(key.privateKey);
}
