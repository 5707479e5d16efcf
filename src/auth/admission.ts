import type { IncomingMessage } from 'node:http';
import type { NextFunction, RequestHandler } from 'express';
import { admitted, scopeOf, type AdmittedScope, type RequestScope } from '../edge/request-scope.ts';
import { namedBy, type Route, type RouteDeclaration } from '../edge/route.ts';
import { AppError, type ErrorCode } from '../envelope/errors.ts';
import { endSpan, type Tracing } from '../tracing/tracing.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { OrganizationLookup, OrganizationState } from '../tenancy/organization-state.ts';
import { whenKnown, type Answer } from './answer.ts';
import { AuthFailure } from './auth-failure.ts';
import { authenticateRequest, unauthorized, type AuthenticateDeps } from './authenticate.ts';
import { holdsWorkspace } from './authorize.ts';
import { reachRefusalsOf, type ReachStep } from './reach.ts';
import { refusedCallerOf, refusing } from './refused-caller.ts';

/** Whom an `/api` request concerns, as the edge read its path (see edge/route.ts). */
export type ApiTarget = Pick<
  Route,
  'entry' | 'params' | 'realm' | 'organization' | 'workspace' | 'refusal'
>;

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
   * Every step of `ADMISSION_STEPS`, in order. The principal at once when this process knows
   * every step's answer (a known organization, a verified token, a cached Basic login), else
   * a promise of it. The first step that refuses throws its AppError, or the promise rejects
   * with it: the same error either way. `path` is the request's as the edge read it.
   */
  admit(target: ApiTarget, req: IncomingMessage, path: string): Answer<Principal>;
  /**
   * `err` as the client of an `/api` request naming `realm` is to hear it, whatever step or
   * handler threw it: a 401 without a challenge (the gateway's own service token refused, deep
   * in a handler) gets the one every `/api` 401 carries (authenticate.ts `unauthorized`).
   */
  challenged(err: unknown, realm: string | undefined): unknown;
}

/** One request as the admission's steps see it, and what they have found so far. */
export interface Admitting {
  readonly target: ApiTarget;
  /** The realm the path names, whose credentials are read. */
  readonly realm: string;
  readonly req: IncomingMessage;
  /** The request's path as the edge read it (what a DPoP proof's `htu` names). */
  readonly path: string;
  /** Set by the `credentials` step, for the steps after it. */
  principal: Principal | undefined;
}

/** What a step reads of a declared route to say what it can answer there. */
export interface DeclaredTarget {
  method: string;
  /** The path names an organization (`/api/{organization_id}/...`), and a workspace of it. */
  organization: boolean;
  workspace: boolean;
  /** `RouteDeclaration.beyondWorkspaces`. */
  beyondWorkspaces: boolean;
}

/**
 * One step: `run` passes (undefined, or a promise that resolves), or refuses with an AppError,
 * thrown or rejected; it answers at once from what this process knows. `refusals`: every code
 * it can refuse a request of a declared route with (the OpenAPI document lists them).
 */
interface AdmissionStep {
  run: (admitting: Admitting, deps: AdmissionDeps) => Answer<void>;
  refusals: (target: DeclaredTarget) => readonly ErrorCode[];
}

/**
 * What reading the credentials can answer (authenticate.ts): a malformed header, bad or missing
 * credentials, too many failed Basic logins, a Keycloak that is absent, too slow or answering
 * nonsense (a Basic login asks it), a database that is down (revocations, DPoP replays).
 */
const CREDENTIAL_REFUSALS: readonly ErrorCode[] = [
  'badRequestHeader',
  'authenticationFailed',
  'tooManyFailedLogins',
  'identityProviderUnavailable',
  'identityProviderTimeout',
  'identityProviderBadGateway',
  'databaseUnavailable',
  'unexpected',
];

/**
 * The one request pipeline of `/api`, for the express routes and the forwarded route alike.
 * A new rule is one more step here, with what it refuses: before `credentials` if it must hold
 * before any credential is read, after it if it needs the caller (`callerOf`).
 */
const ADMISSION_STEPS: readonly AdmissionStep[] = [
  {
    run: organizationEnabled,
    // An id outside the alphabet (the edge's `refusal`), absent, disabled; looked up in the database.
    refusals: ({ organization }) =>
      organization ? ['organizationNotFound', 'organizationDisabled', 'databaseUnavailable'] : [],
  },
  { run: credentials, refusals: () => CREDENTIAL_REFUSALS },
  {
    run: withinReach,
    // Only an organization's users have tokens narrowed to workspaces.
    refusals: ({ method, organization, workspace, beyondWorkspaces }) =>
      reachRefusalsOf(method, workspace || (organization && beyondWorkspaces)),
  },
  {
    run: workspaceRole,
    refusals: ({ workspace }) => (workspace ? ['workspaceNotFound', 'permissionDenied'] : []),
  },
];

/**
 * Every code the admission can answer a request of a declared `/api` route with: each step's,
 * from what the route's method and path say (edge/route.ts reads the path the same way).
 */
export function admissionRefusalsOf(
  route: Pick<RouteDeclaration, 'path' | 'beyondWorkspaces'> & { method: string },
): ErrorCode[] {
  const target: DeclaredTarget = {
    method: route.method,
    ...namedBy(route.path),
    beyondWorkspaces: route.beyondWorkspaces === true,
  };
  return [...new Set(ADMISSION_STEPS.flatMap((step) => step.refusals(target)))];
}

/**
 * Before any credential is read: a disabled organization's tokens and logins, cached or not,
 * are refused here on every route.
 */
function organizationEnabled(admitting: Admitting, deps: AdmissionDeps): Answer<void> {
  const { organization } = admitting.target;
  if (organization === undefined) return undefined;
  const client = deps.clientAddressOf(admitting.req);
  return whenKnown(deps.organizations.stateOf(organization, client), refuseUnlessEnabled);
}

function refuseUnlessEnabled(state: OrganizationState): void {
  if (state === 'absent') throw new AppError('organizationNotFound');
  if (state === 'disabled') throw new AppError('organizationDisabled');
}

/** The credentials are good for the path's realm (authenticate.ts). */
function credentials(admitting: Admitting, deps: AdmissionDeps): Answer<void> {
  return whenKnown(
    authenticateRequest(admitting.req, admitting.realm, admitting.path, deps),
    holdCaller,
    admitting,
  );
}

function holdCaller(principal: Principal, admitting: Admitting): void {
  admitting.principal = principal;
}

/** The caller the `credentials` step found; for the steps after it. */
export function callerOf(admitting: Admitting): Principal {
  if (admitting.principal === undefined) {
    throw new Error('an admission step before credentials asked for the caller');
  }
  return admitting.principal;
}

/**
 * A Bearer token whose session was narrowed at issuance (issue-time fields of the password
 * grant) stays within its reach (reach.ts); the caller it admits carries that reach. The route
 * says what the call reaches: the workspace its path names, or what is beyond any
 * (`beyondWorkspaces`), and the session it ends (`endsSession`), so that a token may always end
 * its own.
 */
function withinReach(admitting: Admitting, deps: AdmissionDeps): Answer<void> {
  const { entry, params, workspace } = admitting.target;
  const call = {
    workspace,
    beyondWorkspaces: entry?.beyondWorkspaces,
    endsSession: entry?.endsSession === undefined ? undefined : params[entry.endsSession],
  };
  let admitted: Answer<Principal>;
  try {
    admitted = deps.reach.admit(callerOf(admitting), admitting.req, call);
  } catch (err) {
    throw challenged(err, admitting.realm, deps);
  }
  return admitted instanceof Promise
    ? admitted.then(
        (principal) => holdCaller(principal, admitting),
        (err: unknown) => {
          throw challenged(err, admitting.realm, deps);
        },
      )
    : holdCaller(admitted, admitting);
}

/** A refusal of the token (its lifetime over): the 401 with its scheme's challenge. */
function challenged(err: unknown, realm: string, deps: AdmissionDeps): unknown {
  return err instanceof AppError && err.cause instanceof AuthFailure
    ? refusing(unauthorized(realm, err.cause, deps), refusedCallerOf(err))
    : err;
}

/** `/api/<org>/workspaces/<ws>/...`: the caller holds the workspace's role (authorize.ts). */
function workspaceRole(admitting: Admitting, deps: AdmissionDeps): Answer<void> {
  const { workspace } = admitting.target;
  if (workspace === undefined || holdsWorkspace(callerOf(admitting), workspace)) return undefined;
  // Refused either way; whether the workspace exists says which refusal.
  return deps.workspaces.find(admitting.realm, workspace).then((found) => {
    throw new AppError(found === undefined ? 'workspaceNotFound' : 'permissionDenied');
  });
}

/**
 * Runs the steps from `first` on: synchronously while they answer at once. A step's refusal
 * after the `credentials` step is noted as the refusal of the caller it found (refused-caller.ts).
 */
function runSteps(admitting: Admitting, deps: AdmissionDeps, first: number): Answer<Principal> {
  for (let index = first; index < ADMISSION_STEPS.length; index++) {
    let pending: Answer<void>;
    try {
      pending = ADMISSION_STEPS[index]!.run(admitting, deps);
    } catch (err) {
      throw refusing(err, admitting.principal);
    }
    if (pending instanceof Promise) {
      return pending.then(
        () => runSteps(admitting, deps, index + 1),
        (err: unknown) => {
          throw refusing(err, admitting.principal);
        },
      );
    }
  }
  return callerOf(admitting);
}

/** The admission of `/api` requests (see `Admission`). */
export function createAdmission(deps: AdmissionDeps): Admission {
  const admission: Admission = {
    admit(target, req, path) {
      if (target.refusal !== undefined) throw new AppError(target.refusal);
      const realm = target.realm;
      if (realm === undefined) throw new Error('admit called on a route that reads no credentials');
      return runSteps({ target, realm, req, path, principal: undefined }, deps, 0);
    },
    challenged(err, realm) {
      return realm !== undefined &&
        err instanceof AppError &&
        err.status === 401 &&
        err.headers['www-authenticate'] === undefined
        ? unauthorized(realm, err, deps)
        : err;
    },
  };
  return deps.tracing ? traced(admission, deps.tracing) : admission;
}

/**
 * `admission` with a span `admission` for each request; `realmgate.known` when it was decided
 * from what the process knew, without waiting.
 */
function traced(admission: Admission, tracing: Tracing): Admission {
  return {
    challenged: (err, realm) => admission.challenged(err, realm),
    admit(target, req, path) {
      const span = tracing.start('admission', 'internal', { 'realmgate.realm': target.realm });
      let answer: Answer<Principal>;
      try {
        answer = tracing.within(span, () => admission.admit(target, req, path));
      } catch (err) {
        endSpan(span, err);
        throw err;
      }
      if (!(answer instanceof Promise)) {
        span.setAttribute('realmgate.known', true);
        endSpan(span);
        return answer;
      }
      return answer.then(
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
  };
}

/**
 * Admits `req` and hands the outcome on: `onAdmitted` with the caller in the scope, or
 * `onRefused` with the refusal (or whatever `onAdmitted` threw). At once, without a promise,
 * when the admission answers from memory. The forwarded route and the express middleware
 * differ only in these two handlers; `reply` is passed through to them (the forwarded route's
 * response, express's `next`), so the hot path allocates no closure.
 */
export function admitRequest<Reply>(
  admission: Admission,
  req: IncomingMessage,
  reply: Reply,
  scope: RequestScope,
  onAdmitted: (req: IncomingMessage, reply: Reply, scope: AdmittedScope) => void,
  onRefused: (reply: Reply, scope: RequestScope, err: unknown) => void,
): void {
  try {
    const principal = admission.admit(scope.route, req, scope.target.path);
    if (principal instanceof Promise) {
      principal
        .then((known) => onAdmitted(req, reply, admitted(scope, known)))
        .catch((err: unknown) => refuse(reply, scope, err, onRefused));
      return;
    }
    onAdmitted(req, reply, admitted(scope, principal));
  } catch (err) {
    refuse(reply, scope, err, onRefused);
  }
}

/**
 * Hands a failure on; one of the admission (no caller admitted yet) is kept in the scope too:
 * the audit log's refusal and reason, and whom it refused when their credentials were good.
 */
function refuse<Reply>(
  reply: Reply,
  scope: RequestScope,
  err: unknown,
  onRefused: (reply: Reply, scope: RequestScope, err: unknown) => void,
): void {
  if (scope.principal === undefined) {
    scope.refusal = err;
    scope.refusedCaller = refusedCallerOf(err);
  }
  onRefused(reply, scope, err);
}

/**
 * The pipeline as express middleware, in front of every `/api` route but the OpenAPI document:
 * the admitted principal goes to the request's scope.
 */
export function admitApiRequests(admission: Admission): RequestHandler {
  return (req, _res, next) => {
    const scope = scopeOf(req);
    // The OpenAPI document: the one `/api` route that reads no credentials.
    if (scope.route.realm === undefined && scope.route.refusal === undefined) {
      next();
      return;
    }
    admitRequest(admission, req, next, scope, continueRoute, passRefusal);
  };
}

const continueRoute = (_req: IncomingMessage, next: NextFunction) => next();
const passRefusal = (next: NextFunction, _scope: RequestScope, err: unknown) => next(err);
