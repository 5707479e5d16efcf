import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { scopeOf } from '../edge/request-scope.ts';
import type { Route } from '../edge/route.ts';
import { AppError } from '../envelope/errors.ts';
import { endSpan, type Tracing } from '../tracing/tracing.ts';
import { authenticateRequest, knownPrincipal, type AuthenticateDeps } from './authenticate.ts';
import { holdsWorkspace } from './authorize.ts';
import type { ReachStep } from './reach.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { OrganizationLookup } from '../tenancy/organization-state.ts';

/** Whom an `/api` request concerns, as the edge read its path (see edge/route.ts). */
export type ApiTarget = Pick<Route, 'realm' | 'organization' | 'workspace' | 'refusal'>;

export interface WorkspaceLookup {
  find(organizationId: string, workspaceId: string): Promise<unknown>;
}

export interface AdmissionDeps extends AuthenticateDeps {
  organizations: OrganizationLookup;
  workspaces: WorkspaceLookup;
  /** What a token narrowed at issuance may reach, and the note of each session's last use. */
  reach: ReachStep;
  /** When set, each admission is a span (its Keycloak calls are children of it). */
  tracing?: Tracing;
}

export interface Admission {
  /**
   * Every step, in order: the organization exists and is enabled, the credentials are good for
   * its realm, the token's reach allows the call, the workspace role is held. Throws the
   * AppError of the first step that fails.
   */
  admit(
    target: ApiTarget,
    authorization: string | undefined,
    clientAddress: string,
    req: IncomingMessage,
  ): Promise<Principal>;
  /**
   * The same steps decided from what this process already knows, without a promise: the
   * principal when all of them pass that way, else undefined (then `admit` decides, and gives
   * every refusal).
   */
  peek(
    target: ApiTarget,
    authorization: string | undefined,
    req: IncomingMessage,
  ): Principal | undefined;
}

/** The one request pipeline of `/api`, for the express routes and the forwarder alike. */
export function createAdmission(deps: AdmissionDeps): Admission {
  const admission = admissionOf(deps);
  return deps.tracing ? traced(admission, deps.tracing) : admission;
}

/** `admission` with a span `admission` for each `admit`, and for each `peek` that decides. */
function traced(admission: Admission, tracing: Tracing): Admission {
  return {
    admit(target, authorization, clientAddress, req) {
      const span = tracing.start('admission', 'internal', { 'realmgate.realm': target.realm });
      return tracing
        .within(span, () => admission.admit(target, authorization, clientAddress, req))
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
    peek(target, authorization, req) {
      const principal = admission.peek(target, authorization, req);
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
    async admit(target, authorization, clientAddress, req) {
      if (target.refusal !== undefined) throw new AppError(target.refusal);
      const realm = target.realm;
      if (realm === undefined) throw new Error('admit called on a route that reads no credentials');
      // Before any credential is read: a disabled organization's tokens and logins, cached or
      // not, are refused here on every route.
      if (target.organization !== undefined) {
        const state = await deps.organizations.stateOf(target.organization);
        if (state === 'absent') throw new AppError('organizationNotFound');
        if (state === 'disabled') throw new AppError('organizationDisabled');
      }
      const principal = await deps.reach.admit(
        await authenticateRequest(authorization, realm, clientAddress, deps),
        target.workspace,
        req,
      );
      if (target.workspace !== undefined && !holdsWorkspace(principal, target.workspace)) {
        const exists = (await deps.workspaces.find(realm, target.workspace)) !== undefined;
        throw new AppError(exists ? 'permissionDenied' : 'workspaceNotFound');
      }
      return principal;
    },
    peek(target, authorization, req) {
      const realm = target.realm;
      if (realm === undefined) return undefined;
      if (target.organization !== undefined && !deps.organizations.isKnown(target.organization)) {
        return undefined;
      }
      const known = knownPrincipal(authorization, realm, deps);
      const principal = known && deps.reach.peek(known, target.workspace, req);
      if (!principal) return undefined;
      if (target.workspace !== undefined && !holdsWorkspace(principal, target.workspace)) {
        return undefined;
      }
      return principal;
    },
  };
}

/**
 * The pipeline as express middleware, in front of every `/api` route but the OpenAPI document:
 * the admitted principal goes to the request's scope.
 */
export function admitApiRequests(
  admission: Admission,
  clientAddressOf: (req: Parameters<RequestHandler>[0]) => string,
): RequestHandler {
  return async (req, _res, next) => {
    try {
      const scope = scopeOf(req);
      // The OpenAPI document: the one `/api` route that reads no credentials.
      if (scope.route.realm === undefined && scope.route.refusal === undefined) {
        next();
        return;
      }
      const authorization = req.headers.authorization;
      scope.principal =
        admission.peek(scope.route, authorization, req) ??
        (await admission.admit(scope.route, authorization, clientAddressOf(req), req));
      next();
    } catch (err) {
      next(err);
    }
  };
}
