import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { loginAsBootstrapAdmin, type KeycloakAdmin } from '../../src/keycloak/admin-client.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { ensureUser } from '../../src/demo/ensure-user.ts';
import {
  ensureOrganizationRealm,
  ensureWorkspaceRoles,
} from '../../src/platform/realm-admin/provisioning.ts';
import { testEnv } from './test-env.ts';

/**
 * Where the test realms' clients announce ended sessions: the test gateway's admin listener,
 * whose revocations reach every replica sharing its Redis prefix. Replicas are given it too
 * (replica.ts), so that none points the realms at its own listener.
 */
export function testBackchannelUrl(): string {
  return `${testEnv().adminUrl}/backchannel-logout`;
}

/** A short random suffix so suites never collide with each other or with earlier runs. */
export function uniqueId(prefix: string): string {
  return `${prefix}${randomBytes(4).toString('hex')}`;
}

/**
 * An admin-API client logged in as the test Keycloak's bootstrap administrator. Its calls are
 * the suites' setup (realms made and deleted, users made), not what they assert: each may take a
 * minute, as making a realm does on a loaded machine once many realms are in the shared Keycloak.
 */
export function keycloakAdmin(): Promise<KeycloakAdmin> {
  const env = testEnv();
  return loginAsBootstrapAdmin({
    keycloakUrl: env.keycloakUrl,
    username: env.keycloakAdminUsername,
    password: env.keycloakAdminPassword,
    timeoutMs: 60_000,
  });
}

/** Creates a fresh organization realm (from the template) with the given workspaces. */
export async function createOrganizationRealm(workspaces: string[] = []): Promise<string> {
  const admin = await keycloakAdmin();
  const organizationId = uniqueId('org-');
  await ensureOrganizationRealm(admin, {
    organizationId,
    organizationName: `Test ${organizationId}`,
    gatewayClientSecret: testEnv().gatewayClientSecret,
    backchannelLogoutUrl: testBackchannelUrl(),
  });
  for (const ws of workspaces) await ensureWorkspaceRoles(admin, organizationId, ws);
  return organizationId;
}

export interface TestUser {
  realm: string;
  username: string;
  password: string;
  otpSecret?: string;
}

/** Creates a user with a random name and password in `realm`. */
export async function createUser(
  realm: string,
  options: { workspaceRoles?: string[]; otp?: boolean; username?: string; password?: string } = {},
): Promise<TestUser> {
  const user: TestUser = {
    realm,
    username: options.username ?? uniqueId('user-'),
    password: options.password ?? randomBytes(12).toString('base64url'),
    otpSecret: options.otp ? randomBytes(15).toString('hex').slice(0, 20) : undefined,
  };
  await ensureUser(await keycloakAdmin(), { ...user, workspaceRoles: options.workspaceRoles });
  return user;
}

/** Gives `user` Keycloak's admin role `roleName` of its realm (client `realm-management`). */
export async function grantRealmManagementRole(user: TestUser, roleName: string): Promise<void> {
  const admin = await keycloakAdmin();
  const realm = user.realm;
  const [management] = await admin.clients.find({ realm, clientId: 'realm-management' });
  const role = await admin.clients.findRole({ realm, id: management!.id!, roleName });
  await admin.users.addClientRoleMappings({
    realm,
    id: await userIdOf(user),
    clientUniqueId: management!.id!,
    roles: [{ id: role!.id!, name: role!.name! }],
  });
}

/** The Keycloak id of a test user. */
export async function userIdOf(user: TestUser): Promise<string> {
  const admin = await keycloakAdmin();
  const [found] = await admin.users.find({
    realm: user.realm,
    username: user.username,
    exact: true,
  });
  return found!.id!;
}

/**
 * Has Keycloak record the realm's failed logins as events (`LOGIN_ERROR`), so that a test can
 * count the wrong passwords Keycloak really checked (`wrongPasswordsChecked`).
 */
export async function recordFailedLogins(realm: string): Promise<void> {
  const admin = await keycloakAdmin();
  await admin.realms.update({ realm }, { eventsEnabled: true, enabledEventTypes: ['LOGIN_ERROR'] });
}

/**
 * How many wrong passwords of the user Keycloak checked: its `LOGIN_ERROR` events, written with
 * each refused login (the realm must record them: `recordFailedLogins`). Not the brute-force
 * detector's `numFailures`, which Keycloak updates apart from the login and which, under
 * concurrent failures, was seen one too high (6 for 5 events and 5 requests seen on the wire, in
 * 3 bursts of 70).
 */
export async function wrongPasswordsChecked(user: TestUser): Promise<number> {
  const admin = await keycloakAdmin();
  const events = await admin.realms.findEvents({
    realm: user.realm,
    user: await userIdOf(user),
    type: 'LOGIN_ERROR',
    max: 1000,
  });
  return events.filter((event) => event.error === 'invalid_user_credentials').length;
}

/** Disables a user, as an administrator would in Keycloak's console. */
export async function disableUser(user: TestUser): Promise<void> {
  const admin = await keycloakAdmin();
  await admin.users.update({ realm: user.realm, id: await userIdOf(user) }, { enabled: false });
}

/**
 * A public client allowed password grants, as a realm's administrator adds one beside the API
 * client (a job runner, another app): `extra` sets its scopes or anything else of it.
 */
export async function createPublicClient(
  realm: string,
  clientId: string,
  extra: Parameters<KeycloakAdmin['clients']['create']>[0] = {},
): Promise<void> {
  const admin = await keycloakAdmin();
  await admin.clients.create({
    realm,
    clientId,
    publicClient: true,
    directAccessGrantsEnabled: true,
    ...extra,
  });
}

/** The user's Keycloak sessions: each password grant opens one. */
export async function sessionCount(user: TestUser): Promise<number> {
  const admin = await keycloakAdmin();
  return (await admin.users.listSessions({ realm: user.realm, id: await userIdOf(user) })).length;
}

/** POSTs a raw form body to a realm's token endpoint through `baseUrl`. */
export async function postToken(
  baseUrl: string,
  realm: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${baseUrl}/realms/${realm}/protocol/openid-connect/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body,
  });
  return {
    status: res.status,
    json: (await res.json()) as Record<string, unknown>,
    headers: res.headers,
  };
}

/** The spec's password grant (4.1), written as the spec writes it: `scope=openid+offline_access`. */
/**
 * An access token from a password grant at Keycloak's own port: a session the gateways never
 * saw begin.
 */
export function grantAtKeycloak(user: TestUser): Promise<string> {
  return accessTokenAt(testEnv().keycloakUrl, user);
}

/** An access token (`scope=openid`) from a password grant at `baseUrl` (Keycloak's, or a gateway's `/auth`). */
export async function accessTokenAt(baseUrl: string, user: TestUser): Promise<string> {
  return (await openidTokensAt(baseUrl, user)).access_token;
}

/** The tokens of a password grant (`scope=openid`) of the API client at `baseUrl`. */
export async function openidTokensAt(
  baseUrl: string,
  user: TestUser,
): Promise<{ access_token: string; refresh_token: string; id_token: string }> {
  const res = await fetch(`${baseUrl}/realms/${user.realm}/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({
      client_id: apiClientIdOf(user.realm),
      grant_type: 'password',
      scope: 'openid',
      username: user.username,
      password: user.password,
    }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { access_token: string; refresh_token: string; id_token: string };
}

export function passwordGrantBody(user: TestUser, extra = ''): string {
  const client = apiClientIdOf(user.realm);
  return (
    `client_id=${encodeURIComponent(client)}&grant_type=password&scope=openid+offline_access` +
    `&username=${encodeURIComponent(user.username)}&password=${encodeURIComponent(user.password)}${extra}`
  );
}

/**
 * A forged token: `claims` in a JWT's shape under the header Keycloak's refresh tokens carry
 * (HS512), with a signature no key made (`c2ln`), for what the gateway reads of a token before
 * anyone verifies it (its `sid`).
 */
export function madeUpToken(claims: Record<string, unknown>): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'HS512' })}.${part(claims)}.c2ln`;
}

/** Decodes a JWT's payload without verifying it (tests only). */
export function claimsOf(jwt: unknown): Record<string, unknown> {
  const payload = String(jwt).split('.')[1] ?? '';
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/**
 * A lifetime in seconds as Keycloak's token answer reports it (`expires_in`,
 * `refresh_expires_in`): Keycloak subtracts its clock's current second from the expiry it set
 * moments earlier, so a second boundary crossed in between makes the answer one less.
 */
export function expectAnswerSeconds(actual: unknown, configured: number): void {
  expect(actual).toBeGreaterThanOrEqual(configured - 1);
  expect(actual).toBeLessThanOrEqual(configured);
}
