import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
import { bodyField, DPOP_AFTER, DPOP_BEFORE } from '../http/audit.ts';
import { routeFor, type AuditInput } from '../http/route-table.ts';
import { tokenLifetimesPatchSchema, tokenLifetimesSchema } from './realm-admin/token-lifetimes.ts';
import { administeredRealms, pathIds, type RealmVariant } from './path-ids.ts';
import {
  masterUserBody,
  operationBody,
  organizationBody,
  organizationUserBody,
  provisionedUser,
  workspaceBody,
} from './provisioning.schemas.ts';
import { operationRecord } from '../automation/operations.schemas.ts';
import { organizationRecord, workspaceRecord } from './organizations.schemas.ts';
import { realmProtection } from './realm-admin/brute-force.ts';
import type { ProvisioningService } from './provisioning.service.ts';

const route = routeFor<ProvisioningService>({ metricsClass: 'provisioning' });

/**
 * The administrators' provisioning API under `/api/platform` (the admission in front lets only
 * master-realm users in). Bodies are checked by their schemas at the mount, their meaning by
 * the service. Every change is audited; targets name things, never a password or secret.
 */
const { organization_id, workspace_id } = pathIds;
const org = ({ params }: AuditInput) => ({ organization: String(params.organization_id) });
const ORG_ERRORS: ErrorCode[] = ['organizationNotFound'];
const WS_ERRORS: ErrorCode[] = ['organizationNotFound', 'workspaceNotFound'];
const USER_EXISTS_DESCRIPTION =
  'Creates a new user only: a username that exists in the realm (in any letter case) answers ' +
  '409 `409-00001` and changes nothing, so no password, role or OTP of an existing account ' +
  'can be replaced through this call.';
const LIFETIMES_DESCRIPTION =
  'Access token lifespan and client session limits of the API client, offline (refresh token) ' +
  'session limits of the realm, in seconds (spec 5.3); and whether the API client requires ' +
  'DPoP (sender-constrained tokens, RFC 9449).';

/**
 * The names of the lifetimes a PATCH body sets (its values are not secrets, but lines stay
 * short): those of the schema only, as the body may be refused for a name of the client's own
 * choosing, which is no fact to keep.
 */
function fieldsOf(sent: unknown): string[] {
  if (!sent || typeof sent !== 'object') return [];
  return Object.keys(sent).filter((name) => Object.hasOwn(tokenLifetimesPatchSchema.shape, name));
}

/** The token lifetimes of realm master, or of an organization's realm. */
function lifetimes({ base, suffix, name: of, params, errors }: RealmVariant) {
  const common = {
    path: `${base}/token-lifetimes`,
    tags: ['tokens'],
    description: LIFETIMES_DESCRIPTION,
    data: tokenLifetimesSchema,
    params,
    errors,
  };
  return [
    route({
      method: 'get',
      operationId: `getTokenLifetimes${suffix}`,
      summary: `Token lifetimes of ${of}`,
      ...common,
      handler: (service, { realm }) => service.getTokenLifetimes(realm),
    }),
    route({
      method: 'patch',
      operationId: `setTokenLifetimes${suffix}`,
      summary: `Change token lifetimes of ${of}`,
      ...common,
      body: tokenLifetimesPatchSchema,
      audit: {
        action: 'token_lifetimes.change',
        // The DPoP switch before and after, when the body sets it: the audit log records its
        // change as one of its own (audit/change-events.ts).
        target: ({ realm, sent, noted }) => ({ realm, fields: fieldsOf(sent), ...noted }),
      },
      handler: async (service, { realm, body, note }) => {
        if (body.dpop_bound_access_tokens === undefined) {
          return service.setTokenLifetimes(realm, body);
        }
        const before = await service.getTokenLifetimes(realm);
        const after = await service.setTokenLifetimes(realm, body);
        note(DPOP_BEFORE, String(before.dpop_bound_access_tokens));
        note(DPOP_AFTER, String(after.dpop_bound_access_tokens));
        return after;
      },
    }),
  ];
}

/**
 * Creating a user, in realm master or in an organization's realm: the same answer, audit and
 * call (an organization's body may add workspaces).
 */
const userCreation = {
  description: USER_EXISTS_DESCRIPTION,
  tags: ['platform'],
  data: provisionedUser,
  audit: {
    action: 'user.create',
    target: ({ realm, sent }: AuditInput) => ({ realm, ...bodyField(sent, 'username') }),
  },
  handler: (
    service: ProvisioningService,
    {
      realm,
      body: { otp_secret, ...body },
    }: { realm: string; body: z.output<typeof organizationUserBody> },
  ) => service.createUser(realm, { ...body, otpSecret: otp_secret }),
};

export const provisioningRoutes = [
  route({
    method: 'post',
    path: '/api/platform/organizations',
    operationId: 'createOrganization',
    summary: 'Create an organization (realm, clients, record)',
    tags: ['platform'],
    body: organizationBody,
    data: organizationRecord,
    audit: { action: 'organization.create', target: ({ sent }) => bodyField(sent, 'id') },
    handler: (service, { body }) => service.createOrganization(body),
  }),
  route({
    method: 'post',
    path: '/api/platform/organizations/{organization_id}/workspaces',
    operationId: 'createWorkspace',
    summary: 'Create a workspace (record and roles `<ws>`, `_<ws>-admin`)',
    tags: ['platform'],
    params: { organization_id },
    body: workspaceBody,
    data: workspaceRecord,
    errors: ORG_ERRORS,
    audit: {
      action: 'workspace.create',
      target: (input) => ({ ...org(input), ...bodyField(input.sent, 'id') }),
    },
    // The creator recorded is the caller the admission established.
    handler: (service, { realm, body, principal }) =>
      service.createWorkspace(realm, body, principal.username),
  }),
  route({
    method: 'post',
    path: '/api/platform/users',
    operationId: 'createMasterUser',
    summary: 'Create a system administrator (realm master)',
    ...userCreation,
    body: masterUserBody,
    errors: ['userExists'],
  }),
  route({
    method: 'post',
    path: '/api/platform/organizations/{organization_id}/users',
    operationId: 'createOrganizationUser',
    summary: 'Create an organization user',
    ...userCreation,
    params: { organization_id },
    body: organizationUserBody,
    // A workspace of the body that the organization does not have is 404 `404-00002`.
    errors: [...WS_ERRORS, 'userExists'],
  }),
  route({
    method: 'post',
    path: '/api/platform/organizations/{organization_id}/workspaces/{workspace_id}/operations',
    operationId: 'createOperation',
    summary: 'Add an operation to a workspace',
    tags: ['automation'],
    params: { organization_id, workspace_id },
    body: operationBody,
    data: operationRecord,
    errors: WS_ERRORS,
    audit: {
      action: 'operation.create',
      target: (input) => ({ ...org(input), workspace: String(input.params.workspace_id) }),
    },
    handler: (service, { realm, params, body, principal }) =>
      service.addOperation(realm, String(params.workspace_id), body, principal.username),
  }),
  ...administeredRealms.flatMap(lifetimes),
  route({
    method: 'post',
    path: '/api/platform/brute-force-detection',
    operationId: 'protectRealms',
    summary: "Turn Keycloak's brute-force detection on in every realm where it is off",
    description:
      'Applies the settings shipped in `realm-export/master.json` (temporary lockout) to every ' +
      'realm, master and organizations, whose brute-force detection is off; a realm where it ' +
      'is on keeps its settings. Safe to repeat. Answers one entry per realm.',
    tags: ['platform'],
    data: z.array(realmProtection),
    audit: {
      action: 'brute_force_detection.apply',
      target: () => ({}),
      realms: (data) => data.filter((realm) => realm.changed).map((realm) => realm.realm),
    },
    handler: (service) => service.protectRealmsFromBruteForce(),
  }),
];
