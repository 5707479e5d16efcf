import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { apiDeclarations } from '../../../src/api/api-routes.ts';
import { answerRelayOf, refuseAdminArea } from '../../../src/auth-proxy/auth-proxy.ts';
import { stepsOf } from '../../../src/auth-proxy/auth-steps.ts';
import {
  AUTH_ROUTES,
  authEntryOf,
  endingOf,
  TOKEN_ROUTE,
  type AuthStep,
} from '../../../src/auth-proxy/auth-routes.ts';
import { guardBootstrapAdmin } from '../../../src/auth-proxy/bootstrap-admin-guard.ts';
import {
  jobCredentials,
  type JobCredentialsDeps,
} from '../../../src/auth-proxy/job-credentials.ts';
import { passwordAttemptOf } from '../../../src/auth-proxy/password-attempt-throttle.ts';
import { answerWrongCredentials401 } from '../../../src/auth-proxy/wrong-credentials.ts';
import { enterScope } from '../../../src/edge/request-scope.ts';
import { parseRequestTarget } from '../../../src/edge/request-target.ts';
import { compileRoutes, type Route } from '../../../src/edge/route.ts';
import { AppError } from '../../../src/envelope/errors.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { keywordOf } from '../../helpers/path-fuzz.ts';

/** The reader the gateway compiles: the `/api` tables and the `/auth` one. */
const read = compileRoutes([...apiDeclarations(true), ...AUTH_ROUTES]);

function routeOf(method: string, url: string): Route {
  const target = parseRequestTarget(url);
  if ('refused' in target) throw new Error(`${url}: ${target.refused}`);
  return read(target.segments, method);
}
/** A request as it reaches the `/auth` mount: its scope from the edge, the form the guard read. */
function request(method: string, url: string, form?: string): Request {
  const target = parseRequestTarget(url);
  if ('refused' in target) throw new Error(`${url}: ${target.refused}`);
  const req = {
    method,
    url,
    headers: {},
    body:
      form === undefined
        ? undefined
        : { bytes: Buffer.from(form), fields: new URLSearchParams(form) },
  } as unknown as Request;
  const route = read(target.segments, method);
  enterScope(req as IncomingMessage, { requestId: 'r', target, route, principal: undefined });
  return req;
}

/** Runs an express handler; what it did: went on (`next`, with its argument) or answered. */
function run(
  handler: (req: Request, res: Response, next: NextFunction) => unknown,
  req: Request,
): { next: boolean; err?: unknown; status?: number } {
  const outcome: { next: boolean; err?: unknown; status?: number } = { next: false };
  const res = {
    statusCode: 200,
    status(code: number) {
      outcome.status = code;
      return res;
    },
    json: () => res,
    writeHead(code: number) {
      outcome.status = code;
      return res;
    },
    end: () => res,
  } as unknown as Response;
  void handler(req, res, (err?: unknown) => {
    outcome.next = true;
    outcome.err = err;
  });
  return outcome;
}

const TOKEN = '/auth/realms/acme/protocol/openid-connect/token';

describe('the /auth route table compiled', () => {
  it('reaches every entry by its own path: any method, HEAD a GET, with or without a last slash', () => {
    const example = (path: string) => path.replace(/\{([^}]+)\}/g, (_, name: string) => `${name}1`);
    for (const entry of AUTH_ROUTES) {
      const path = example(entry.path);
      // A fallback (`below`) is tried with a method and a path below that nothing closer serves.
      const methods = entry.below
        ? ['OPTIONS', 'PATCH']
        : entry.method === 'any'
          ? ['GET', 'POST', 'OPTIONS', 'DELETE']
          : entry.method === 'get'
            ? ['GET', 'HEAD']
            : [entry.method.toUpperCase()];
      const spellings = [path, `${path}/`, ...(entry.below ? [`${path}/zz/y`] : [])];
      for (const method of methods) {
        for (const written of spellings) {
          const route = routeOf(method, written);
          expect(route.entry, `${method} ${written}`).toBe(entry);
          expect(route.metricsClass).toBe(entry.metricsClass);
          expect(route.realm).toBe(entry.path.includes('{realm}') ? 'realm1' : undefined);
          expect(route.organization).toBeUndefined();
          expect(route.refusal).toBeUndefined();
        }
      }
    }
  });

  it('counts the token endpoint as `token` however it is asked for, nothing else', () => {
    for (const method of ['POST', 'GET', 'OPTIONS', 'HEAD']) {
      for (const url of [TOKEN, `${TOKEN}/`, '/auth/realms/acme/protocol/openid-connect/%74oken']) {
        expect(routeOf(method, url)).toMatchObject({
          entry: TOKEN_ROUTE,
          metricsClass: 'token',
          realm: 'acme',
          params: { realm: 'acme' },
        });
      }
    }
    for (const url of [
      `${TOKEN}/x`,
      '/auth/realms/acme/protocol/openid-connect/TOKEN',
      '/auth/realms/acme/protocol/openid-connect/certs',
      '/auth/realms/acme/PROTOCOL/openid-connect/token',
      '/auth/realms/acme',
      '/auth/admin/master/console/',
    ]) {
      expect(routeOf('POST', url).metricsClass, url).toBe('other');
    }
  });

  it('reads the realm decoded, as written', () => {
    expect(routeOf('POST', '/auth/realms/a%20b/protocol/openid-connect/token').realm).toBe('a b');
    expect(routeOf('POST', '/auth/realms/%6Daster/protocol/openid-connect/token').realm).toBe(
      'master',
    );
    expect(routeOf('POST', '/auth/realms/MASTER/login-actions/authenticate').realm).toBe('MASTER');
    expect(routeOf('GET', '/auth/admin/realms/acme/users/u1').realm).toBeUndefined();
    expect(routeOf('DELETE', '/auth/admin/realms/acme/users/u1').params).toEqual({
      realm: 'acme',
      user: 'u1',
    });
  });

  it('gives no entry outside the admin area and the realms', () => {
    for (const url of ['/auth', '/auth/', '/auth/realms', '/auth/realms/', '/auth/resources/x/y']) {
      expect(routeOf('GET', url).entry, url).toBeUndefined();
    }
  });

  it('refuses at start an /auth table it would read two ways', () => {
    const entry = { method: 'get' as const, metricsClass: 'other' as const };
    expect(() =>
      compileRoutes([
        { ...entry, path: '/auth/realms/{realm}' },
        { ...entry, path: '/auth/realms/{name}/x' },
      ]),
    ).toThrow(/\{name\} where another path has \{realm\}/);
    expect(() =>
      compileRoutes([
        { ...entry, path: '/auth/x', below: true },
        { ...entry, path: '/auth/x/', below: true },
      ]),
    ).toThrow(/declared twice/);
    expect(() => compileRoutes([{ ...entry, path: '/api/platform/x', below: true }])).toThrow(
      /for \/auth entries/,
    );
    expect(() => compileRoutes([{ ...entry, path: '/api/platform/x', caseless: true }])).toThrow(
      /for \/auth entries/,
    );
  });
});

/**
 * Where each step applies, written another way (over the whole path, as the guards read it
 * before the table): the reader must agree on every path, keywords in any case included, so no
 * spelling escapes a guard. A trailing slash changes nothing (Keycloak serves `/token/` as
 * `/token`), where before it took the path away from the token endpoint's steps.
 */
function expectedSteps(method: string, segments: readonly string[]): Set<AuthStep> {
  const steps = new Set<AuthStep>();
  if (segments[0] !== 'auth') return steps;
  const path = segments.at(-1) === '' ? segments.slice(0, -1) : segments;
  const [, area = '', realm = '', ...rest] = path;
  const at = rest.join('/');
  // A token's reach holds on every call to Keycloak's own areas (token-reach-guard.ts).
  if (area.toLowerCase() === 'admin') steps.add('adminListener').add('tokenReach');
  if (area === 'admin' && path.length === 2 && (method === 'GET' || method === 'HEAD')) {
    steps.add('consoleHome');
  }
  if (area === 'admin' && at === 'console' && (method === 'GET' || method === 'HEAD')) {
    steps.add('consolePage');
  }
  if (area !== 'realms' || realm === '') return steps;
  steps.add('bootstrapAdmin').add('tokenReach');
  if (at === 'protocol/openid-connect/token')
    steps.add('dpopProofKey').add('jobCredentials').add('passwordGrant');
  if (rest[0] === 'login-actions' || /^protocol\/openid-connect\/auth(\/|$)/.test(at)) {
    steps.add('loginPage');
  }
  // Every login page's POST (the step lets any other method through), but the registration's.
  if (at === 'login-actions/registration') steps.add('registrationForm');
  else if (rest[0] === 'login-actions') steps.add('passwordForm');
  return steps;
}

/** Every entry with an ending rule (access-endings.ts) runs `endAccess`, and no other. */
function withEnding(steps: Set<AuthStep>, route: Route): Set<AuthStep> {
  return endingOf(route) === undefined ? steps : new Set([...steps, 'endAccess']);
}

const KEYWORDS = [
  'auth',
  'admin',
  'realms',
  'master',
  'console',
  'protocol',
  'openid-connect',
  'token',
  'logout',
  'revoke',
  'login-actions',
  'authenticate',
  'registration',
  'users',
  'sessions',
];
const keyword = keywordOf(KEYWORDS);
const segment = fc.oneof(
  { weight: 6, arbitrary: keyword },
  { weight: 2, arbitrary: fc.constantFrom('acme', 'u1', 'a b', '__proto__', 'constructor') },
  {
    weight: 1,
    arbitrary: fc.string({ minLength: 1, maxLength: 6 }).filter((s) => !s.includes('/')),
  },
);
const segments = fc
  .tuple(fc.array(segment, { maxLength: 7 }), fc.boolean())
  .map(([rest, slash]) => ['auth', ...rest, ...(slash ? [''] : [])]);
const methods = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS');

describe('every /auth path gets its steps', () => {
  it('as the guards read the path themselves before, however it is spelled', () => {
    fc.assert(
      fc.property(methods, segments, (method, path) => {
        const route = read(path, method);
        const steps = new Set(authEntryOf(route)?.steps ?? []);
        const expected = withEnding(expectedSteps(method, path), route);
        // `consoleHome` and `consolePage` are GET entries: other methods get the area's steps.
        expect([...steps].sort(), `${method} /${path.join('/')}`).toEqual([...expected].sort());
        if (steps.has('bootstrapAdmin')) expect(route.realm).toBe(path[2]);
        for (const value of Object.values(route.params)) expect(path).toContain(value);
      }),
      { numRuns: 5000 },
    );
  });

  it('every entry of an area carries its steps', () => {
    for (const entry of AUTH_ROUTES) {
      const [, , area] = entry.path.split('/');
      expect(entry.steps.includes('adminListener'), entry.path).toBe(area === 'admin');
      expect(entry.steps.includes('bootstrapAdmin'), entry.path).toBe(area === 'realms');
      expect(entry.steps.includes('tokenReach'), entry.path).toBe(true);
    }
  });
});

/** The steps a request runs through on the `/auth` mount (auth-steps.ts), as the edge read it. */
const stepsFor = (method: string, url: string) => stepsOf(authEntryOf(routeOf(method, url)));

describe('each /auth request runs the steps its entry names, in the order of the one table', () => {
  it("the token endpoint: its audit (a form the reader refuses is recorded too), the form read, a token's reach, then the bootstrap guard, the DPoP key, job credentials, the grant", () => {
    for (const url of [TOKEN, `${TOKEN}/`, '/auth/realms/acme/protocol/openid-connect/%74oken']) {
      expect(stepsFor('POST', url), url).toEqual([
        'auditGrant',
        'everyRequest',
        'tokenReach',
        'bootstrapAdmin',
        'dpopProofKey',
        'jobCredentials',
        'passwordGrant',
      ]);
    }
    expect(stepsFor('GET', '/auth/resources/x')).toEqual(['everyRequest']);
  });

  it('the admin area is refused before any body is read, every spelling of it, and nothing else', () => {
    for (const url of [
      '/auth/admin/',
      '/auth/admin',
      '/auth/ADMIN/',
      '/auth/%61dmin/master/console/',
      '/auth/Admin/realms/acme/users/u1',
      '/auth/admin/realms/acme/users/u1/',
    ]) {
      expect(stepsFor('DELETE', url)[0], url).toBe('adminListener');
    }
    for (const url of [TOKEN, '/auth/realms/admin/x', '/auth/resources/admin']) {
      expect(stepsFor('GET', url), url).not.toContain('adminListener');
    }
    const { next, err } = run(refuseAdminArea, request('GET', '/auth/admin/'));
    expect(next).toBe(true);
    expect(err).toBeInstanceOf(AppError);
  });

  it("the bootstrap administrator's guard holds on every path of realm master, in any case", () => {
    const guard = guardBootstrapAdmin({
      bootstrapAdmin: 'admin',
      // Names without `@`: never asked (an e-mail's account is test/integration's).
      accounts: { accountOf: () => Promise.reject(new Error('not asked')) },
      clientAddress: () => '127.0.0.1',
      metrics: { authFailure: () => {} },
      logger: createLogger('silent'),
    });
    const form = 'grant_type=password&username=Admin&password=p';
    for (const url of [
      '/auth/realms/master/protocol/openid-connect/token',
      '/auth/realms/master/protocol/openid-connect/token/',
      '/auth/realms/MASTER/protocol/openid-connect/token',
      '/auth/realms/%6Daster/login-actions/authenticate',
      '/auth/realms/master',
      '/auth/realms/master/anything/else',
    ]) {
      expect(stepsFor('POST', url), url).toContain('bootstrapAdmin');
      expect(run(guard, request('POST', url, form)), url).toEqual({ next: false, status: 400 });
    }
    expect(run(guard, request('POST', TOKEN, form))).toEqual({ next: true, err: undefined });
    for (const url of ['/auth/admin/master/console/', '/auth/realms/', '/auth/x/master']) {
      expect(stepsFor('POST', url), url).not.toContain('bootstrapAdmin');
    }
  });

  it('the password throttle reads a grant on the token entry and a form on the login entry', () => {
    const grant = 'grant_type=password&username=bob&password=p&client_id=c';
    for (const url of [TOKEN, `${TOKEN}/`, '/auth/realms/acme/protocol/openid-connect/%74oken']) {
      expect(passwordAttemptOf(request('POST', url, grant), 'grant'), url).toMatchObject({
        kind: 'grant',
        realm: 'acme',
        username: 'bob',
      });
    }
    for (const url of [
      '/auth/realms/acme/login-actions/authenticate',
      '/auth/realms/acme/login-actions/authenticate/',
      '/auth/realms/acme/login-actions/first-broker-login',
      '/auth/realms/acme/login-actions/reset-credentials',
    ]) {
      expect(stepsFor('POST', url), url).toContain('passwordForm');
      const form = request('POST', url, 'username=bob&password=p');
      expect(passwordAttemptOf(form, 'form')).toMatchObject({
        kind: 'form',
        realm: 'acme',
        username: 'bob',
        fields: ['password'],
      });
    }
    // A password or one-time password posted without a user name (identity-first login, the
    // one-time-password page): a guess all the same, of an account the gateway does not know.
    const form = (body: string) =>
      passwordAttemptOf(
        request('POST', '/auth/realms/acme/login-actions/authenticate', body),
        'form',
      );
    expect(form('password=p')).toMatchObject({ username: undefined, fields: ['password'] });
    expect(form('username=&password=p')).toMatchObject({
      username: undefined,
      fields: ['password'],
    });
    expect(form('otp=123456')).toMatchObject({ username: undefined, fields: ['otp'] });
    expect(form('totp=123456')).toMatchObject({ username: undefined, fields: ['totp'] });
    expect(form('recoveryCodeInput=c')).toMatchObject({ fields: ['recoveryCodeInput'] });
    // Every secret posted: the page's own field decides, whatever is posted beside it.
    expect(form('otp=123456&password=x')).toMatchObject({ fields: ['password', 'otp'] });
    // Self-registration chooses a password, checks none: its bodies are read, nothing counted.
    for (const url of [
      '/auth/realms/acme/login-actions/registration',
      '/auth/realms/acme/login-actions/registration/',
      '/auth/realms/acme/login-actions/%72egistration',
    ]) {
      expect(stepsFor('POST', url), url).toContain('registrationForm');
      expect(stepsFor('POST', url), url).not.toContain('passwordForm');
    }
    // Setting up a one-time password (its secret posted along, on the required action's page)
    // guesses nothing; a secret posted along anywhere else takes no guess past the throttle.
    const setup = request(
      'POST',
      '/auth/realms/acme/login-actions/required-action?execution=CONFIGURE_TOTP',
      'totp=123456&totpSecret=s&userLabel=',
    );
    expect(passwordAttemptOf(setup, 'form')).toBeUndefined();
    expect(form('totp=123456&totpSecret=s&userLabel=')).toMatchObject({ fields: ['totp'] });
    expect(form('username=bob&password=p&totpSecret=s')).toMatchObject({ fields: ['password'] });
    expect(form('username=bob')).toBeUndefined();
    for (const url of [
      '/auth/realms/acme/protocol/openid-connect/logout',
      '/auth/realms/acme/protocol/openid-connect/TOKEN',
      `${TOKEN}/x`,
      '/auth/admin/realms/acme/protocol/openid-connect/token',
    ]) {
      expect(stepsFor('POST', url), url).not.toContain('passwordGrant');
    }
    expect(passwordAttemptOf(request('GET', TOKEN, grant), 'grant')).toBeUndefined();
    expect(passwordAttemptOf(request('POST', TOKEN, 'grant_type=refresh_token'), 'grant')).toBe(
      undefined,
    );
  });

  it("Keycloak's refusal of credentials is read for a password grant, not a refresh grant", () => {
    const grant = request('POST', `${TOKEN}/`, 'grant_type=password&username=bob&password=p');
    expect(run(answerWrongCredentials401, grant)).toEqual({ next: true, err: undefined });
    expect(answerRelayOf(grant)).toBeDefined();
    const refresh = request('POST', TOKEN, 'grant_type=refresh_token');
    run(answerWrongCredentials401, refresh);
    expect(answerRelayOf(refresh)).toBeUndefined();
  });

  it("job credentials' fields are checked on the token entry only", () => {
    const deps = {} as JobCredentialsDeps;
    const fields = 'grant_type=password&username=bob&password=p&realmgate_read_only=1';
    expect(run(jobCredentials(deps), request('POST', `${TOKEN}/`, fields))).toEqual({
      next: false,
      status: 400,
    });
    expect(stepsFor('POST', '/auth/realms/acme/login-actions/authenticate')).not.toContain(
      'jobCredentials',
    );
  });

  it('what a request ends is its entry’s rule, read for HEAD as Keycloak serves it: as a GET', () => {
    const logout = '/auth/realms/acme/protocol/openid-connect/logout?id_token_hint=i';
    const input = (url: string) => ({
      query: new URLSearchParams(url.split('?')[1]),
      form: undefined,
      json: undefined,
    });
    for (const method of ['GET', 'HEAD']) {
      expect(endingOf(routeOf(method, logout))?.endingOf(input(logout))).toEqual({
        kind: 'logout',
        realm: 'acme',
        idTokenHint: 'i',
      });
    }
    expect(endingOf(routeOf('GET', '/auth/ADMIN/realms/acme/users/u1'))).toBeUndefined();
    expect(endingOf(routeOf('PATCH', '/auth/admin/realms/acme/users/u1'))).toBeUndefined();
  });
});
