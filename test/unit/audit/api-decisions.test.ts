import { describe, expect, it } from 'vitest';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { apiDecisionOf, credentialOf, reasonOf } from '../../../src/audit/api-decisions.ts';
import { FORWARDED_ROUTE } from '../../../src/automation/forward-route.ts';
import type { RequestScope } from '../../../src/edge/request-scope.ts';
import { AuthFailure } from '../../../src/auth/auth-failure.ts';
import { AppError } from '../../../src/envelope/errors.ts';

describe('the audit log of /api decisions', () => {
  it('names the credential kind by its scheme, in any case', () => {
    expect(credentialOf(undefined)).toBe('none');
    expect(credentialOf('  ')).toBe('none');
    expect(credentialOf('Basic abc')).toBe('basic');
    expect(credentialOf('bearer x.y.z')).toBe('bearer');
    expect(credentialOf('DPoP x.y.z')).toBe('dpop');
    expect(credentialOf('Negotiate abc')).toBe('other');
  });

  it("gives an authentication's reason, else the refusal's own", () => {
    const failed = new AppError('authenticationFailed', {
      cause: new AuthFailure('basic', 'wrong_password', 'Wrong.'),
    });
    expect(reasonOf(failed)).toBe('wrong_password');
    expect(reasonOf(new AppError('tooManyFailedLogins'))).toBe('throttled');
    expect(reasonOf(new AppError('permissionDenied'))).toBe('missing_role');
    expect(reasonOf(new AppError('outsideTokenReach'))).toBe('out_of_reach');
    expect(reasonOf(new AppError('readOnlyToken'))).toBe('read_only');
    expect(reasonOf(new AppError('databaseUnavailable'))).toBe('databaseUnavailable');
    expect(reasonOf(new Error('boom'))).toBe('unexpected');
  });

  it('records an answer that did not all reach its client as cut: by whom, and what was sent', () => {
    const decision = (res: Partial<ServerResponse>, cutResult?: string) =>
      apiDecisionOf(
        { method: 'GET', headers: {} } as IncomingMessage,
        { statusCode: 200, headersSent: true, writableFinished: true, ...res } as ServerResponse,
        {
          principal: { realm: 'acme', userId: 'u1', username: 'alice' },
          route: { realm: 'acme', organization: 'acme', entry: { path: '/api/x' }, params: {} },
          target: { path: '/api/acme/x' },
          requestId: 'r1',
          ...(cutResult !== undefined && { cutResult }),
        } as unknown as RequestScope,
        '127.0.0.1',
        { now: () => 0 },
        () => true,
      );
    const answered = { outcome: 'success', status: 200, result: null, reason: null };
    expect(decision({})).toMatchObject(answered);
    // Its head sent, then the client went, or the gateway's read failed midway.
    const cut = { outcome: 'failure', status: 200, reason: 'answer_cut' };
    expect(decision({ writableFinished: false })).toMatchObject({ ...cut, result: null });
    expect(decision({ writableFinished: false }, '500-99999')).toMatchObject({
      ...cut,
      result: '500-99999',
    });
    // Gone before any head: no status was answered (200 is Node's default).
    expect(decision({ writableFinished: false, headersSent: false })).toMatchObject({
      ...cut,
      status: null,
      result: null,
    });
  });

  it('keeps the route and workspace of a forwarded call, not the upstream path below it', () => {
    const decision = (entry: { path: string; forwarded?: boolean }, path: string) =>
      apiDecisionOf(
        { method: 'POST', headers: {} } as IncomingMessage,
        { statusCode: 200 } as ServerResponse,
        {
          principal: { realm: 'acme', userId: 'u1', username: 'alice' },
          route: { realm: 'acme', organization: 'acme', workspace: 'ws1', entry, params: {} },
          target: { path },
          requestId: 'r1',
        } as unknown as RequestScope,
        '127.0.0.1',
        { now: () => 0 },
        () => true,
      );
    // Below the forwarded route, the path is the upstream's: a webhook's token, a signed part.
    const forwarded = decision(
      FORWARDED_ROUTE,
      '/api/acme/workspaces/ws1/ita/api/webhooks/hook-secret-3f9a/run',
    );
    expect(forwarded).toMatchObject({
      route: FORWARDED_ROUTE.path,
      workspace: 'ws1',
      path: null,
    });
    expect(JSON.stringify(forwarded)).not.toContain('hook-secret-3f9a');
    // The gateway's own routes: the path names ids only, and says which.
    const own = decision(
      { path: '/api/{organization_id}/platform/users/{user_id}' },
      '/api/acme/platform/users/u2',
    );
    expect(own).toMatchObject({ path: '/api/acme/platform/users/u2' });
  });
});
