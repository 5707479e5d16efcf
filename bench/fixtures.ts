import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { loginAsBootstrapAdmin, type KeycloakAdmin } from '../src/keycloak/admin-client.ts';
import { ensureUser } from '../src/demo/ensure-user.ts';
import { apiClientIdOf } from '../src/tenancy/identifiers.ts';
import {
  ensureOrganizationRealm,
  ensureWorkspaceRoles,
} from '../src/platform/realm-admin/provisioning.ts';
import { createOrganizationsRepo } from '../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../src/platform/workspaces.repo.ts';
import { setTokenLifetimes } from '../src/platform/realm-admin/token-lifetimes.ts';
import { newProofKey, proofMaker } from './dpop-proofs.ts';
import { origin, PORTS } from './settings.ts';
import type { BenchSecrets } from './stack.ts';

export const WORKSPACE = 'ws1';

export type BenchUser = { realm: string; username: string; password: string };

export type Provisioner = ReturnType<typeof createProvisioner>;

/** Organizations, users and tokens, through Keycloak directly (not through a gateway). */
export function createProvisioner(keycloakUrl: string, secrets: BenchSecrets, db: Knex) {
  let admin: { client: KeycloakAdmin; since: number } | undefined;
  // The bootstrap administrator, logged in anew before its token can expire.
  const adminClient = async () => {
    if (!admin || Date.now() - admin.since > 30_000) {
      const client = await loginAsBootstrapAdmin({
        keycloakUrl,
        username: secrets.keycloakAdminUsername,
        password: secrets.keycloakAdminPassword,
        timeoutMs: 30_000,
      });
      admin = { client, since: Date.now() };
    }
    return admin.client;
  };
  /** A token request to `realm` (at Keycloak, or at `via.url` with `via.headers`). */
  const token = async (
    realm: string,
    form: Record<string, string>,
    via = { url: `${keycloakUrl}/realms/${encodeURIComponent(realm)}`, headers: {} },
  ) => {
    const body = new URLSearchParams({ client_id: apiClientIdOf(realm), ...form });
    const signal = AbortSignal.timeout(30_000);
    const init = { method: 'POST', headers: via.headers, body, signal };
    const res = await fetch(`${via.url}/protocol/openid-connect/token`, init);
    const json = (await res.json()) as Record<string, string>;
    if (res.status !== 200 || !json.access_token) {
      throw new Error(`token request on ${realm} failed: ${res.status} ${json.error ?? ''}`);
    }
    return {
      accessToken: json.access_token,
      refreshToken: json.refresh_token ?? '',
      tokenType: json.token_type,
    };
  };
  const passwordForm = (u: BenchUser) => ({
    grant_type: 'password',
    scope: 'openid',
    username: u.username,
    password: u.password,
  });
  return {
    /** Organization realm with workspace `ws1` (roles and database rows). */
    async organization(id: string): Promise<void> {
      const [name, client] = [`Bench ${id}`, await adminClient()];
      const { gatewayClientSecret } = secrets;
      const realm = { organizationId: id, organizationName: name, gatewayClientSecret };
      await ensureOrganizationRealm(client, realm);
      await ensureWorkspaceRoles(client, id, WORKSPACE);
      await createOrganizationsRepo(db).insertIfAbsent({ id, name });
      await createWorkspacesRepo(db).insertIfAbsent({ organizationId: id, id: WORKSPACE, name });
    },
    /**
     * The API client's access tokens live `seconds` (Keycloak's default is 5 minutes): a token
     * fetched once serves a whole run.
     */
    async longLivedTokens(realm: string, seconds = 3600): Promise<void> {
      await setTokenLifetimes(await adminClient(), realm, { access_token_lifespan: seconds });
    },
    /** A user holding the `ws1` role, with a random password. */
    async user(realm: string, username: string): Promise<BenchUser> {
      const user = { realm, username, password: randomBytes(12).toString('base64url') };
      await ensureUser(await adminClient(), { ...user, workspaceRoles: [WORKSPACE] });
      return user;
    },
    /** `count` such users, named `prefix` 1, 2... */
    async users(realm: string, prefix: string, count: number): Promise<BenchUser[]> {
      const made: BenchUser[] = [];
      for (let i = 1; i <= count; i++) made.push(await this.user(realm, `${prefix}${i}`));
      return made;
    },
    passwordGrant: (u: BenchUser) => token(u.realm, passwordForm(u)),
    token,
    /** A password grant through `gatewayUrl`'s `/auth` with a proof of a new key: a bound token. */
    async dpopGrant(gatewayUrl: string, u: BenchUser) {
      const url = `${gatewayUrl}/auth/realms/${u.realm}`;
      const key = newProofKey();
      // As Keycloak compares it: PUBLIC_URL, the main gateway's address for every gateway.
      const htu = `${origin(PORTS.gateway)}/auth/realms/${u.realm}/protocol/openid-connect/token`;
      const dpop = proofMaker({ privateJwk: key, method: 'POST', htu })();
      const grant = await token(u.realm, passwordForm(u), { url, headers: { dpop } });
      if (grant.tokenType !== 'DPoP') throw new Error(`DPoP grant on ${u.realm}: not bound`);
      return { key, accessToken: grant.accessToken };
    },
  };
}

/**
 * What the rows need in `org` (tokens living an hour): Bearer, Basic, DPoP and 64 no-cache
 * users, `tokens` access tokens by refresh grants (170 s at most), `realms` organizations with
 * a user and a token each (240 s at most).
 */
export async function provision(p: Provisioner, org: string, tokens: number, realms: number) {
  await p.organization(org);
  await p.longLivedTokens(org);
  const bearerUser = await p.user(org, 'bench-bearer-1');
  const basicUser = await p.user(org, 'bench-basic-1');
  const dpop = await p.dpopGrant(origin(PORTS.gateway), await p.user(org, 'bench-dpop-1'));
  const noCacheUsers = await p.users(org, 'bench-nocache-', 64);
  const grant = await p.passwordGrant(bearerUser);
  let started = Date.now();
  const manyTokens: string[] = [];
  const form = { grant_type: 'refresh_token', refresh_token: grant.refreshToken };
  const refresh = async () => {
    while (manyTokens.length < tokens && Date.now() - started < 170_000) {
      const { accessToken } = await p.token(org, form);
      if (manyTokens.length < tokens) manyTokens.push(accessToken);
    }
  };
  await Promise.all(Array.from({ length: 12 }, refresh));
  const done: { realm: string; token: string }[] = [];
  let next = 0;
  started = Date.now();
  const organization = async () => {
    while (next < realms && Date.now() - started < 240_000) {
      const realm = `bench-r${String(++next).padStart(3, '0')}`;
      await p.organization(realm);
      const user = await p.user(realm, 'bench-user');
      done.push({ realm, token: (await p.passwordGrant(user)).accessToken });
    }
  };
  await Promise.all(Array.from({ length: 4 }, organization));
  return { token: grant.accessToken, manyTokens, realms: done, basicUser, noCacheUsers, dpop };
}
