import type { RequestHandler } from 'express';
import { targetOf } from '../edge/request-target.ts';
import { AppError } from '../envelope/errors.ts';
import { endSpan, type Tracing } from '../tracing/tracing.ts';
import { isOrganizationId, isWorkspaceId } from '../keycloak/identifiers.ts';
import { authenticateRequest, knownPrincipal, type AuthenticateDeps } from './authenticate.ts';
import { holdsWorkspace } from './authorize.ts';
import type { Principal } from './principal.ts';

/** The realm of administrators, reached through `/api/platform/...`. */
export const MASTER_REALM = 'master';

/** What an `/api/...` path asks of the caller: whose realm, and which workspace if any. */
export interface ApiTarget {
  realm: string;
  /** The organization named by the path (`/api/<org>/...`); undefined for `/api/platform/...`. */
  organization?: string;
  /** The workspace named by `/api/<org>/workspaces/<ws>/...`. */
  workspace?: string;
}

/** Whether an organization exists, and whether it is enabled. */
export type OrganizationState = 'enabled' | 'disabled' | 'absent';

/** "Does this organization exist, enabled", answered fast (platform/organization-directory.ts). */
export interface OrganizationLookup {
  stateOf(id: string): Promise<OrganizationState>;
  /** True when known to exist and be enabled right now, without waiting. */
  isKnown(id: string): boolean;
}

export interface WorkspaceLookup {
  find(organizationId: string, workspaceId: string): Promise<unknown>;
}

export interface AdmissionDeps extends AuthenticateDeps {
  organizations: OrganizationLookup;
  workspaces: WorkspaceLookup;
  /** When set, each admission is a span (its Keycloak calls are children of it). */
  tracing?: Tracing;
}

/**
 * Reads an `/api` path's segments (the edge decoded them): `/api/platform/...` is `master`,
 * `/api/<org>/...` is `<org>`, `/api/<org>/workspaces/<ws>/...` also names workspace `<ws>`.
 * An id outside its alphabet is 404 at once (`404-00001`, `404-00002`), before anything is
 * looked up. Undefined for the one path that needs no credentials, `/api/openapi.json`.
 */
export function apiTargetOf(segments: readonly string[]): ApiTarget | undefined {
  const first = segments[1] ?? '';
  if (first === 'platform') return { realm: MASTER_REALM };
  if (first === 'openapi.json' && segments.length === 2) return undefined;
  if (!isOrganizationId(first)) throw new AppError('organizationNotFound');
  // In any case: a router or an upstream that matches paths case-insensitively must not find
  // a workspace route the admission did not see.
  const workspace = segments[2]?.toLowerCase() === 'workspaces' ? segments[3] : undefined;
  if (!workspace) return { realm: first, organization: first };
  if (!isWorkspaceId(workspace)) throw new AppError('workspaceNotFound');
  return { realm: first, organization: first, workspace };
}

export interface Admission {
  /**
   * Every step, in order: the organization exists and is enabled, the credentials are good for
   * its realm, the workspace role is held. Throws the AppError of the first step that fails.
   */
  admit(
    target: ApiTarget,
    authorization: string | undefined,
    clientAddress: string,
  ): Promise<Principal>;
  /**
   * The same steps decided from what this process already knows, without a promise: the
   * principal when all of them pass that way, else undefined (then `admit` decides, and gives
   * every refusal).
   */
  peek(target: ApiTarget, authorization: string | undefined): Principal | undefined;
}

/** The one request pipeline of `/api`, for the express routes and the forwarder alike. */
export function createAdmission(deps: AdmissionDeps): Admission {
  const admission = admissionOf(deps);
  return deps.tracing ? traced(admission, deps.tracing) : admission;
}

/** `admission` with a span `admission` for each `admit`, and for each `peek` that decides. */
function traced(admission: Admission, tracing: Tracing): Admission {
  return {
    admit(target, authorization, clientAddress) {
      const span = tracing.start('admission', 'internal', { 'realmgate.realm': target.realm });
      return tracing
        .within(span, () => admission.admit(target, authorization, clientAddress))
        .then(
          (principal) => {
            endSpan(span);
            return principal;
          },
          (err: unknown) => {
            endSpan(span, err);
            throw err;
          },
        );
    },
    peek(target, authorization) {
      const principal = admission.peek(target, authorization);
      if (principal) {
        tracing
          .start('admission', 'internal', {
            'realmgate.realm': target.realm,
            'realmgate.known': true,
          })
          .end();
      }
      return principal;
    },
  };
}

function admissionOf(deps: AdmissionDeps): Admission {
  return {
    async admit(target, authorization, clientAddress) {
      // Before any credential is read: a disabled organization's tokens and logins, cached or
      // not, are refused here on every route.
      if (target.organization !== undefined) {
        const state = await deps.organizations.stateOf(target.organization);
        if (state === 'absent') throw new AppError('organizationNotFound');
        if (state === 'disabled') throw new AppError('organizationDisabled');
      }
      const principal = await authenticateRequest(authorization, target.realm, clientAddress, deps);
      if (target.workspace !== undefined && !holdsWorkspace(principal, target.workspace)) {
        const exists = (await deps.workspaces.find(target.realm, target.workspace)) !== undefined;
        throw new AppError(exists ? 'permissionDenied' : 'workspaceNotFound');
      }
      return principal;
    },
    peek(target, authorization) {
      if (target.organization !== undefined && !deps.organizations.isKnown(target.organization)) {
        return undefined;
      }
      const principal = knownPrincipal(authorization, target.realm, deps);
      if (!principal) return undefined;
      if (target.workspace !== undefined && !holdsWorkspace(principal, target.workspace)) {
        return undefined;
      }
      return principal;
    },
  };
}

/**
 * The pipeline as express middleware, in front of every `/api` route: the admitted principal
 * goes to `res.locals.principal`.
 */
export function admitApiRequests(
  admission: Admission,
  clientAddressOf: (req: Parameters<RequestHandler>[0]) => string,
): RequestHandler {
  return async (req, res, next) => {
    try {
      const target = apiTargetOf(targetOf(req).segments);
      if (target) {
        const authorization = req.headers.authorization;
        res.locals.principal =
          admission.peek(target, authorization) ??
          (await admission.admit(target, authorization, clientAddressOf(req)));
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}
