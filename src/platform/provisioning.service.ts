import type { Knex } from 'knex';
import { createOperationsRepo } from '../automation/operations.repo.ts';
import type { Operation } from '../automation/operations.schemas.ts';
import { AppError } from '../envelope/errors.ts';
import { isHttpStatus, type KeycloakAdmin } from '../keycloak/admin-client.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { isOrganizationId, isWorkspaceId, MASTER_REALM } from '../tenancy/identifiers.ts';
import { protectRealms, type RealmProtection } from './realm-admin/brute-force.ts';
import {
  createUser,
  ensureOrganizationRealm,
  ensureWorkspaceRoles,
} from './realm-admin/provisioning.ts';
import { realmExists } from './realm-admin/realm-lifecycle.ts';
import {
  getTokenLifetimes,
  setTokenLifetimes,
  tokenLifetimesPatchSchema,
  type TokenLifetimes,
  type TokenLifetimesPatch,
} from './realm-admin/token-lifetimes.ts';
import type { OrganizationEvents } from './organization-events.ts';
import { longestAccessTokenSeconds, workspacesOfUsers } from './realm-admin/users.ts';
import type { KeepFormerLifetime } from './token-refusal.ts';
import { createOrganizationsRepo } from './organizations.repo.ts';
import type { Organization, Workspace } from './organizations.schemas.ts';
import { createPlatformRecords } from './platform-records.ts';
import type { ProvisionedUser } from './provisioning.schemas.ts';
import { createWorkspacesRepo } from './workspaces.repo.ts';
import { normalizeBase32Secret, validatePassword, validateUsername } from './user-input.ts';

export interface NewUserInput {
  username: string;
  password: string;
  /** Workspace ids the user gets a role on; organization realms only. */
  workspaces?: string[];
  /** OTP secret in base32, as authenticator apps show it. */
  otpSecret?: string;
}

export interface NewOperationInput {
  operation_name: string;
  scheduled_date_for_execution?: string | null;
  environment?: string | null;
  remarks?: string | null;
}

export interface ProvisioningService {
  createOrganization(input: { id: string; name: string }): Promise<Organization>;
  createWorkspace(
    organizationId: string,
    input: { id: string; name: string; description?: string; environments?: string[] },
    actor?: string,
  ): Promise<Workspace>;
  /** Creates a new user; an existing username answers 409 `409-00001` and changes nothing. */
  createUser(realm: string, input: NewUserInput): Promise<ProvisionedUser>;
  addOperation(
    organizationId: string,
    workspaceId: string,
    input: NewOperationInput,
    actor?: string,
  ): Promise<Operation>;
  getTokenLifetimes(realm: string): Promise<TokenLifetimes>;
  setTokenLifetimes(realm: string, patch: TokenLifetimesPatch): Promise<TokenLifetimes>;
  /** Turns Keycloak's brute-force detection on in every realm where it is off. */
  protectRealmsFromBruteForce(): Promise<RealmProtection[]>;
}

/**
 * An organization's record being made, as the audit log must know it: what belongs to an id's
 * previous organization is not the new one's (audit/audit-incarnations.ts).
 */
export interface OrganizationBeginning {
  /**
   * Before the transaction that makes the record, on every create: what this process still
   * holds for the id's previous organization (its last records, the summaries of its refusals
   * still counted) is written first. Outside the transaction: it writes on connections of its
   * own, and the embedded database has one.
   */
  settle(organizationId: string): Promise<void>;
  /** Within that transaction (`trx`), only when it makes the record: the new period begins. */
  begin(organizationId: string, trx: Knex): Promise<void>;
}

/**
 * Creates organizations, workspaces, users and operations in Keycloak and the database. Every
 * step but user creation is idempotent and Keycloak goes first, so a call that failed half-way
 * can be repeated; creating an organization over a delete that stopped half-way makes it anew.
 * Ids are checked against their alphabet before any database or Keycloak call.
 */
export function createProvisioningService(deps: {
  adminSession: AdminSession;
  db: Knex;
  gatewayClientSecret: string;
  /** Where a new realm's clients announce ended sessions (realm-admin/backchannel-logout.ts). */
  backchannelLogoutUrl?: string;
  /** Told a realm made aligned with `backchannelLogoutUrl` (realm-alignment.ts records it). */
  recordAligned?: (realm: { id: string; realm: string }) => Promise<void>;
  /** What must happen as an organization's record is made: the audit log's. */
  organizationBegins?: OrganizationBeginning;
  /**
   * A new organization's realm's settings besides the template's: the audit log's event saving
   * (audit/keycloak-event-records.ts), on from the realm's creation, not from its first pull.
   */
  newRealmSettings?: Readonly<Record<string, unknown>>;
  /**
   * Tells every replica of an organization once its record exists (organization-events.ts): one
   * that looked the id up before and found it absent would otherwise answer 404 a while longer.
   */
  announce: OrganizationEvents['announce'];
  /**
   * Told the realm's longest access-token lifetime as it was before a change of its lifetimes
   * (token-refusal.ts): a refusal made after a shortening lasts as long as a token issued before.
   */
  keepFormerLifetime?: KeepFormerLifetime;
  /**
   * Told the DPoP switch of a realm as a change of its lifetimes left it: this replica's `/api`
   * holds it from the next request, not a minute later (auth/dpop/dpop-switch.ts).
   */
  dpopSwitchSet?: (realm: string, required: boolean) => void;
}): ProvisioningService {
  const { adminSession } = deps;
  const organizations = createOrganizationsRepo(deps.db);
  const workspaces = createWorkspacesRepo(deps.db);
  const operations = createOperationsRepo(deps.db);

  const { requireOrganization, requireWorkspace, requireRealm } = createPlatformRecords(deps.db);

  return {
    async createOrganization({ id, name }) {
      if (!isOrganizationId(id)) throw badRequest(`invalid organization id: ${JSON.stringify(id)}`);
      const recorded = await organizations.find(id);
      const madeId = await adminSession.run(async (admin) => {
        // A record is written only once its realm exists: a record without one is what a delete
        // that stopped after Keycloak left. Its rows go first (workspaces and operations with
        // them), so that the new organization inherits none of the old one's records or state.
        // Only on Keycloak's word that the realm is missing: a proxy's 404 fails the call.
        if (recorded && !(await realmExists(admin, id))) {
          await organizations.delete(id);
        }
        return ensureOrganizationRealm(admin, {
          organizationId: id,
          organizationName: name,
          gatewayClientSecret: deps.gatewayClientSecret,
          backchannelLogoutUrl: deps.backchannelLogoutUrl,
          realmSettings: deps.newRealmSettings,
        });
      });
      // Made aligned: no replica's start need read it (realm-alignment.ts).
      if (madeId !== undefined) await deps.recordAligned?.({ id: madeId, realm: id });
      // The period begins with the record, in its transaction: until it is committed nothing is
      // written to this id's log, and of calls racing to make it (another replica, a retry)
      // only the one whose insert made it begins one; the others wait for it and find it made.
      await deps.organizationBegins?.settle(id);
      const organization = await deps.db.transaction(async (trx) => {
        const records = createOrganizationsRepo(trx);
        if (await records.insertNew({ id, name })) await deps.organizationBegins?.begin(id, trx);
        return records.get(id);
      });
      // Its state as recorded: a repeated create of a disabled organization leaves it disabled.
      await deps.announce({
        organizationId: id,
        state: organization.enabled ? 'enabled' : 'disabled',
      });
      return organization;
    },

    async createWorkspace(organizationId, input, actor = '') {
      await requireOrganization(organizationId);
      if (!isWorkspaceId(input.id))
        throw badRequest(`invalid workspace id: ${JSON.stringify(input.id)}`);
      await adminSession.run((admin) => ensureWorkspaceRoles(admin, organizationId, input.id));
      return workspaces.insertIfAbsent({ organizationId, ...input, user: actor });
    },

    async createUser(realm, input) {
      validateUsername(input.username);
      validatePassword(input.password);
      const otpSecretBase32 =
        input.otpSecret === undefined ? undefined : normalizeBase32Secret(input.otpSecret);
      const workspaceIds = [...new Set(input.workspaces ?? [])];
      const malformed = workspaceIds.find((id) => !isWorkspaceId(id));
      if (malformed !== undefined)
        throw badRequest(`invalid workspace id: ${JSON.stringify(malformed)}`);
      await requireRealm(realm);
      if (realm === MASTER_REALM && workspaceIds.length > 0)
        throw badRequest('workspaces apply to organization users only');
      for (const workspaceId of workspaceIds) await requireWorkspace(realm, workspaceId);

      return adminSession.run(async (admin) => {
        const id = await refusedAsBadRequest(() =>
          createUser(admin, {
            realm,
            username: input.username,
            password: input.password,
            workspaceRoles: workspaceIds,
            otpSecretBase32,
          }),
        );
        return describeUser(admin, realm, id);
      });
    },

    async addOperation(organizationId, workspaceId, input, actor = '') {
      await requireOrganization(organizationId);
      await requireWorkspace(organizationId, workspaceId);
      return operations.insert({
        organizationId,
        workspaceId,
        operationName: input.operation_name,
        scheduledDateForExecution: input.scheduled_date_for_execution ?? null,
        environment: input.environment ?? null,
        remarks: input.remarks ?? null,
        user: actor,
      });
    },

    async getTokenLifetimes(realm) {
      await requireRealm(realm);
      return adminSession.run((admin) => getTokenLifetimes(admin, realm));
    },

    async setTokenLifetimes(realm, patch) {
      const parsed = tokenLifetimesPatchSchema.safeParse(patch);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw badRequest(`${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid'}`);
      }
      await requireRealm(realm);
      return adminSession.run(async (admin) => {
        const former = await longestAccessTokenSeconds(admin, realm);
        try {
          const set = await setTokenLifetimes(admin, realm, parsed.data);
          deps.dpopSwitchSet?.(realm, set.dpop_bound_access_tokens);
          return set;
        } finally {
          // Even after a change that failed halfway: part of it may be in effect.
          await deps.keepFormerLifetime?.(realm, former);
        }
      });
    },

    protectRealmsFromBruteForce() {
      return adminSession.run((admin) => protectRealms(admin));
    },
  };
}

/** Keycloak's own name for the user (it lowercases usernames) and its workspace roles. */
async function describeUser(
  admin: KeycloakAdmin,
  realm: string,
  id: string,
): Promise<ProvisionedUser> {
  const user = await admin.users.findOne({ realm, id });
  if (!user?.username) throw new Error(`user ${id} vanished from realm ${realm}`);
  const workspaces =
    realm === MASTER_REALM ? [] : ((await workspacesOfUsers(admin, realm, [id])).get(id) ?? []);
  return { id, username: user.username, realm, workspaces };
}

/**
 * Keycloak's user profile and password policy have the last word on a username or password
 * (e.g. at least 3 characters, no spaces); its 400 names the rule and never the value.
 */
async function refusedAsBadRequest<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!isHttpStatus(err, 400)) throw err;
    const data = (err as { responseData?: Record<string, unknown> }).responseData ?? {};
    const reason = [data.error_description, data.errorMessage, data.error].find(
      (value): value is string => typeof value === 'string',
    );
    throw badRequest(`Keycloak refused the user: ${reason ?? 'invalid user'}`, err);
  }
}

function badRequest(message: string, cause?: unknown): AppError {
  return new AppError('badRequestBody', { message, cause });
}
