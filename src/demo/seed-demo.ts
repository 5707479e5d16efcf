import type { Knex } from 'knex';
import type { KeycloakAdmin } from '../keycloak/admin-client.ts';
import { ensureUser } from './ensure-user.ts';
import {
  ensureOrganizationRealm,
  ensureWorkspaceRoles,
} from '../platform/realm-admin/provisioning.ts';
import { createOrganizationsRepo } from '../platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../platform/workspaces.repo.ts';
import { createOperationsRepo } from '../automation/operations.repo.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

export const DEMO = {
  adminUser: 'demo-admin',
  organization: 'demo-org',
  workspace: 'demo-ws',
  user: 'demo-user',
  outsider: 'demo-outsider',
  otpUser: 'demo-otp',
} as const;

const DEMO_OPERATIONS = ['Nightly patching', 'Weekly backup check', 'Quarterly DR drill'];

/**
 * Creates what the demo needs, if absent: users in `master` and in `demo-org`, the organization
 * realm with workspace `demo-ws`, and their database rows. Passwords are reset on every run so
 * the printed password always works.
 */
export async function seedDemo(deps: {
  admin: KeycloakAdmin;
  db: Knex;
  gatewayClientSecret: string;
  /** Where the demo realm's clients announce ended sessions (auth-proxy/backchannel-logout.ts). */
  backchannelLogoutUrl: string;
  demoPassword: string;
  otpSecret: string;
}): Promise<void> {
  const { admin, db, demoPassword } = deps;
  const org = DEMO.organization;
  const ws = DEMO.workspace;

  await ensureUser(admin, {
    realm: MASTER_REALM,
    username: DEMO.adminUser,
    password: demoPassword,
  });

  await ensureOrganizationRealm(admin, {
    organizationId: org,
    organizationName: 'Demo organization',
    gatewayClientSecret: deps.gatewayClientSecret,
    backchannelLogoutUrl: deps.backchannelLogoutUrl,
  });
  await createOrganizationsRepo(db).insertIfAbsent({ id: org, name: 'Demo organization' });

  await ensureWorkspaceRoles(admin, org, ws);
  await createWorkspacesRepo(db).insertIfAbsent({
    organizationId: org,
    id: ws,
    name: 'Demo workspace',
    description: 'Created by the realmgate demo',
    environments: ['production', 'staging'],
    user: DEMO.adminUser,
  });
  const operations = createOperationsRepo(db);
  if ((await operations.listByWorkspace(org, ws)).length === 0) {
    for (const operationName of DEMO_OPERATIONS) {
      await operations.insert({
        organizationId: org,
        workspaceId: ws,
        operationName,
        user: DEMO.adminUser,
      });
    }
  }

  await ensureUser(admin, {
    realm: org,
    username: DEMO.user,
    password: demoPassword,
    workspaceRoles: [ws],
  });
  await ensureUser(admin, { realm: org, username: DEMO.outsider, password: demoPassword });
  await ensureUser(admin, {
    realm: org,
    username: DEMO.otpUser,
    password: demoPassword,
    workspaceRoles: [ws],
    otpSecret: deps.otpSecret,
  });
}
