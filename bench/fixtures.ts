import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { loginAsBootstrapAdmin, type KeycloakAdmin } from '../src/keycloak/admin-client.ts';
import { apiClientIdOf } from '../src/keycloak/identifiers.ts';
import { ensureUser } from '../src/keycloak/ensure-user.ts';
import { ensureOrganizationRealm, ensureWorkspaceRoles } from '../src/keycloak/provisioning.ts';
import { createOrganizationsRepo } from '../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../src/platform/workspaces.repo.ts';
import type { BenchSecrets } from './stack.ts';

export const WORKSPACE = 'ws1';

export interface BenchUser {
  realm: string;
  username: string;
  password: string;
}

/** Keycloak's admin API and token endpoint, reached directly (not through a gateway). */
export class Provisioner {
  private admin: { client: KeycloakAdmin; since: number } | undefined;
  private readonly keycloakUrl: string;
  private readonly secrets: BenchSecrets;
  private readonly db: Knex;

  constructor(keycloakUrl: string, secrets: BenchSecrets, db: Knex) {
    this.keycloakUrl = keycloakUrl;
    this.secrets = secrets;
    this.db = db;
  }

  /** The bootstrap administrator's client, logged in anew before its token can expire. */
  async adminClient(): Promise<KeycloakAdmin> {
    if (!this.admin || Date.now() - this.admin.since > 30_000) {
      const client = await loginAsBootstrapAdmin({
        keycloakUrl: this.keycloakUrl,
        username: this.secrets.keycloakAdminUsername,
        password: this.secrets.keycloakAdminPassword,
        timeoutMs: 30_000,
      });
      this.admin = { client, since: Date.now() };
    }
    return this.admin.client;
  }

  /** Organization realm with workspace `ws1` (roles and database rows). Safe to repeat. */
  async organization(organizationId: string): Promise<void> {
    const admin = await this.adminClient();
    await ensureOrganizationRealm(admin, {
      organizationId,
      organizationName: `Bench ${organizationId}`,
      gatewayClientSecret: this.secrets.gatewayClientSecret,
    });
    await ensureWorkspaceRoles(admin, organizationId, WORKSPACE);
    await createOrganizationsRepo(this.db).insertIfAbsent({
      id: organizationId,
      name: `Bench ${organizationId}`,
    });
    await createWorkspacesRepo(this.db).insertIfAbsent({
      organizationId,
      id: WORKSPACE,
      name: 'Bench workspace',
    });
  }

  /** A user holding the `ws1` role, with a random password. */
  async user(realm: string, username: string): Promise<BenchUser> {
    const user = { realm, username, password: randomBytes(12).toString('base64url') };
    await ensureUser(await this.adminClient(), { ...user, workspaceRoles: [WORKSPACE] });
    return user;
  }

  /** Number of Keycloak sessions of a user: one per password grant that reached Keycloak. */
  async sessionCount(user: BenchUser): Promise<number> {
    const admin = await this.adminClient();
    const [found] = await admin.users.find({
      realm: user.realm,
      username: user.username,
      exact: true,
    });
    if (!found?.id) throw new Error(`user ${user.username} not found`);
    const sessions = await admin.users.listSessions({ realm: user.realm, id: found.id });
    return sessions.length;
  }

  /** A password grant (`scope=openid`) on the realm's API client. */
  async passwordGrant(user: BenchUser): Promise<{ accessToken: string; refreshToken: string }> {
    const answer = await this.tokenRequest(user.realm, {
      grant_type: 'password',
      client_id: apiClientIdOf(user.realm),
      scope: 'openid',
      username: user.username,
      password: user.password,
    });
    return { accessToken: answer.access_token, refreshToken: answer.refresh_token };
  }

  /**
   * Distinct access tokens from refresh grants on one session, `concurrency` at a time, until
   * `count` are there or `budgetMs` has passed.
   */
  async refreshedTokens(
    user: BenchUser,
    refreshToken: string,
    count: number,
    budgetMs: number,
    concurrency = 12,
  ): Promise<string[]> {
    const tokens: string[] = [];
    const deadline = Date.now() + budgetMs;
    const worker = async () => {
      while (tokens.length < count && Date.now() < deadline) {
        const answer = await this.tokenRequest(user.realm, {
          grant_type: 'refresh_token',
          client_id: apiClientIdOf(user.realm),
          refresh_token: refreshToken,
        });
        if (tokens.length < count) tokens.push(answer.access_token);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return tokens;
  }

  private async tokenRequest(
    realm: string,
    form: Record<string, string>,
  ): Promise<{ access_token: string; refresh_token: string }> {
    const url = `${this.keycloakUrl}/realms/${encodeURIComponent(realm)}/protocol/openid-connect/token`;
    const res = await fetch(url, {
      method: 'POST',
      body: new URLSearchParams(form),
      signal: AbortSignal.timeout(30_000),
    });
    const json = (await res.json()) as Record<string, string>;
    if (res.status !== 200 || !json.access_token) {
      throw new Error(`token request on ${realm} failed: ${res.status} ${json.error ?? ''}`);
    }
    return json as { access_token: string; refresh_token: string };
  }
}

/**
 * Creates organizations `<prefix>001`... with one user and one access token each,
 * `concurrency` at a time, until `count` are done or `budgetMs` has passed.
 */
export async function provisionRealms(
  provisioner: Provisioner,
  options: { prefix: string; count: number; budgetMs: number; concurrency: number },
): Promise<{ realm: string; token: string }[]> {
  const done: { realm: string; token: string }[] = [];
  const deadline = Date.now() + options.budgetMs;
  let next = 0;
  const worker = async () => {
    while (next < options.count && Date.now() < deadline) {
      const realm = `${options.prefix}${String(++next).padStart(3, '0')}`;
      await provisioner.organization(realm);
      const user = await provisioner.user(realm, 'bench-user');
      done.push({ realm, token: (await provisioner.passwordGrant(user)).accessToken });
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return done;
}
