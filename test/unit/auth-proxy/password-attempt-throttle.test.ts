import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { formOutcomeOf } from '../../../src/auth-proxy/password-attempt-throttle.ts';

const html = (inner: string) => `<!DOCTYPE html>\n<html lang="en">\n<body>${inner}</body></html>`;
const loginForm = html(
  '<form id="kc-form-login" method="post"><input id="username" name="username"><input id="password" name="password" type="password"></form>',
);
const otpPage = html('<form id="kc-otp-login-form"><input id="otp" name="otp"></form>');
const answer = (status: number, body: string, headers: Record<string, string> = {}) => ({
  status,
  headers: { 'content-type': 'text/html;charset=utf-8', ...headers },
  body,
});

/** What Keycloak's answer to its login form says of the password posted (see formOutcomeOf). */
describe('the login form outcome', () => {
  it('the login form again (a wrong password): refused', () => {
    expect(formOutcomeOf(answer(200, loginForm))).toBe('refused');
    expect(
      formOutcomeOf(answer(200, loginForm.replace('name="password"', "name='password'"))),
    ).toBe('refused');
  });

  it('an answer it cannot read as a page (compressed, not HTML): refused', () => {
    expect(formOutcomeOf(answer(200, gzipSync(otpPage).toString('utf8')))).toBe('refused');
    expect(
      formOutcomeOf(answer(200, '{"error":"x"}', { 'content-type': 'application/json' })),
    ).toBe('refused');
  });

  it("the next step's page (a one-time password) or an error page: no verdict", () => {
    expect(formOutcomeOf(answer(200, otpPage))).toBe('noVerdict');
    expect(formOutcomeOf(answer(400, html('<p>Cookie not found.</p>')))).toBe('noVerdict');
  });

  it('a redirect out of the login pages: logged in; back into them: no verdict', () => {
    const back = '/auth/realms/org/login-actions/authenticate?execution=e&client_id=app';
    expect(formOutcomeOf(answer(302, '', { location: 'http://127.0.0.1:9/cb?code=c' }))).toBe(
      'loggedIn',
    );
    expect(formOutcomeOf(answer(302, '', { location: `http://gw${back}` }))).toBe('noVerdict');
    expect(
      formOutcomeOf(
        answer(302, '', { location: 'http://gw/auth/realms/org/login-actions/required-action' }),
      ),
    ).toBe('noVerdict');
  });

  it('a Location that is no URL: refused (the stricter way), never an error', () => {
    for (const location of ['http://[::1', 'http://a b/cb', 'https://:x']) {
      expect(formOutcomeOf(answer(302, '', { location })), location).toBe('refused');
    }
  });

  it('a one-time password posted: the page asking for it again is a refusal', () => {
    expect(formOutcomeOf(answer(200, otpPage), ['otp'])).toBe('refused');
    expect(formOutcomeOf(answer(200, otpPage.replace('name="otp"', 'name="totp"')), ['totp'])).toBe(
      'refused',
    );
    // Any other page (the login form again: the login started over) says nothing of it.
    expect(formOutcomeOf(answer(200, loginForm), ['otp'])).toBe('noVerdict');
    expect(
      formOutcomeOf(answer(302, '', { location: 'http://127.0.0.1:9/cb?code=c' }), ['otp']),
    ).toBe('loggedIn');
  });

  it('a password posted beside a one-time password or a recovery code: the page asking for either again is a refusal', () => {
    // Keycloak's second factor page checks its own field and ignores a password beside it.
    expect(formOutcomeOf(answer(200, otpPage), ['password', 'otp'])).toBe('refused');
    const recoveryPage = otpPage.replace('name="otp"', 'name="recoveryCodeInput"');
    expect(formOutcomeOf(answer(200, recoveryPage), ['password', 'recoveryCodeInput'])).toBe(
      'refused',
    );
    expect(formOutcomeOf(answer(200, loginForm), ['password', 'otp'])).toBe('refused');
    expect(formOutcomeOf(answer(200, html('<p>Welcome</p>')), ['password', 'otp'])).toBe(
      'noVerdict',
    );
  });
});
