import { describe, expect, it } from 'vitest';
import { credentialOf, reasonOf } from '../../../src/audit/api-decisions.ts';
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
});
