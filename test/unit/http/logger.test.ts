import { describe, expect, it } from 'vitest';
import { loggerToLines } from '../../helpers/log-lines.ts';

function expectNoneIn(line: string, secrets: string[]): void {
  for (const secret of secrets) expect(line).not.toContain(secret);
}

describe('log redaction', () => {
  it('blanks credentials wherever they appear in a logged object', () => {
    const { logger, lines } = loggerToLines();
    logger.info(
      {
        req: {
          headers: { authorization: 'Basic dXNlcjpzM2NyZXQ=', cookie: 'KEYCLOAK_SESSION=abc' },
        },
        login: { password: 's3cret-pw', username: 'alice' },
        grant: {
          refresh_token: 'eyJ.refresh',
          access_token: 'eyJ.access',
          client_secret: 'cs-123',
        },
      },
      'hello',
    );
    const line = lines.join('');
    expectNoneIn(line, [
      'dXNlcjpzM2NyZXQ=',
      'KEYCLOAK_SESSION=abc',
      's3cret-pw',
      'eyJ.refresh',
      'eyJ.access',
      'cs-123',
    ]);
    expect(JSON.parse(line)).toMatchObject({
      login: { username: 'alice', password: '[redacted]' },
    });
  });

  it('blanks credentials at any depth: an error’s fields, a Keycloak answer, headers in an object', () => {
    const { logger, lines } = loggerToLines();
    // What the admin client's errors carry: Keycloak's answer body as `responseData`.
    const err = Object.assign(new Error('Request failed'), {
      responseData: { error: 'invalid_grant', answer: { refresh_token: 'eyJ.deep-refresh' } },
      request: {
        options: {
          headers: {
            Authorization: 'Bearer eyJ.deep-access',
            DPoP: 'eyJ.deep-proof',
            'Set-Cookie': 'AUTH_SESSION_ID=deep',
          },
        },
      },
    });
    logger.child({ component: 'test' }).error(
      {
        err,
        call: {
          user: {
            username: 'bob',
            credentials: [{ type: 'password', value: 'deep-user-pw', temporary: false }],
          },
          form: { grant_type: 'refresh_token', client: { clientSecret: 'deep-cs' } },
          steps: [{ outcome: { body: { id_token: 'eyJ.deep-id', password: 'deep-pw' } } }],
        },
      },
      'Keycloak call failed',
    );
    const line = lines.join('');
    expectNoneIn(line, [
      'eyJ.deep-refresh',
      'eyJ.deep-access',
      'eyJ.deep-proof',
      'AUTH_SESSION_ID=deep',
      'deep-user-pw',
      'deep-cs',
      'eyJ.deep-id',
      'deep-pw',
    ]);
    // What is not a credential stays readable, a secret's name as a value too.
    expect(JSON.parse(line)).toMatchObject({
      component: 'test',
      msg: 'Keycloak call failed',
      err: { message: 'Request failed', responseData: { error: 'invalid_grant' } },
      call: {
        user: { username: 'bob', credentials: '[redacted]' },
        form: { grant_type: 'refresh_token', client: { clientSecret: '[redacted]' } },
        steps: [{ outcome: { body: { id_token: '[redacted]', password: '[redacted]' } } }],
      },
    });
  });

  it('blanks each name the word list makes a secret, in any case', () => {
    const { logger, lines } = loggerToLines();
    const named = {
      'X-Api-Key': 'k-1',
      api_key: 'k-2',
      userPasswd: 'k-3',
      'Proxy-Authorization': 'k-4',
      'set-cookie': 'k-5',
      clientAssertion: 'k-6',
      logoutToken: 'k-7',
    };
    logger.info({ named }, 'names');
    const line = lines.join('');
    expectNoneIn(line, Object.values(named));
    const redacted = Object.fromEntries(Object.keys(named).map((name) => [name, '[redacted]']));
    expect(JSON.parse(line)).toMatchObject({ named: redacted });
  });

  it('blanks the one-time secrets of a login or grant: one-time passwords, recovery codes, PKCE', () => {
    const { logger, lines } = loggerToLines();
    const named = {
      otp: '123456',
      TOTP: '654321',
      recoveryCodeInput: 'rc-1',
      recovery_codes: 'rc-2',
      code_verifier: 'pkce-1',
      codeVerifier: 'pkce-2',
      device_code: 'dc-1',
    };
    logger.info({ form: { grant_type: 'password', username: 'alice', ...named } }, 'names');
    const line = lines.join('');
    expectNoneIn(line, Object.values(named));
    const redacted = Object.fromEntries(Object.keys(named).map((name) => [name, '[redacted]']));
    expect(JSON.parse(line)).toMatchObject({
      form: { grant_type: 'password', username: 'alice', ...redacted },
    });
  });

  it("keeps an error's code and the envelope's result code readable", () => {
    const { logger, lines } = loggerToLines();
    const err = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    // A line with a secret's name in it, so that it is read field by field.
    logger.error(
      { err, result: '503-00001', code: 'databaseUnavailable', password: 'pw' },
      'failed',
    );
    expect(JSON.parse(lines.join(''))).toMatchObject({
      err: { code: 'ECONNREFUSED' },
      result: '503-00001',
      code: 'databaseUnavailable',
      password: '[redacted]',
    });
  });

  it('keeps every field that is no credential, where a secret is only named in a value', () => {
    const { logger, lines } = loggerToLines();
    const path = '/auth/realms/acme/protocol/openid-connect/token';
    logger.info({ reqId: 'r-1', method: 'POST', path, status: 400 }, 'request refused');
    expect(JSON.parse(lines.join(''))).toEqual({
      level: 30,
      time: expect.any(Number) as number,
      service: 'realmgate',
      reqId: 'r-1',
      method: 'POST',
      path,
      status: 400,
      msg: 'request refused',
    });
  });
});
