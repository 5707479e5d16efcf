import { UnsecuredJWT } from 'jose';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { AppError } from '../../../src/envelope/errors.ts';
import type { KeycloakAdmin } from '../../../src/keycloak/admin-client.ts';
import { renewingSession } from '../../../src/keycloak/admin-session.ts';
import { manualClock, type TestClock } from '../../helpers/test-clock.ts';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
let clock: TestClock;

/** A client as a login leaves it: only its access token matters to the session. */
function loggedIn(lifetimeSeconds: number, issuedAtSeconds = T0 / 1000): KeycloakAdmin {
  const accessToken = new UnsecuredJWT({})
    .setIssuedAt(issuedAtSeconds)
    .setExpirationTime(issuedAtSeconds + lifetimeSeconds)
    .encode();
  return { accessToken } as KeycloakAdmin;
}

/** An error as the admin client throws it for an HTTP answer. */
const answered = (status: number) =>
  Object.assign(new Error(`HTTP ${status}`), { response: { status } });

describe('the renewing admin session', () => {
  beforeEach(() => {
    clock = manualClock(T0);
  });

  it('logs in once for concurrent callers, and again 15 s before the token expires', async () => {
    const login = vi.fn(() => Promise.resolve(loggedIn(300)));
    const session = renewingSession(login, clock);
    const [a, b] = await Promise.all([session.get(), session.get()]);
    expect(a).toBe(b);
    expect(login).toHaveBeenCalledTimes(1);
    clock.advance(284_000);
    expect(await session.get()).toBe(a);
    clock.advance(1_000);
    expect(await session.get()).not.toBe(a);
    expect(login).toHaveBeenCalledTimes(2);
  });

  it('measures the lifetime on its own clock: a Keycloak clock an hour off changes nothing', async () => {
    const login = vi.fn(() => Promise.resolve(loggedIn(300, T0 / 1000 - 3600)));
    const session = renewingSession(login, clock);
    const first = await session.get();
    clock.advance(200_000);
    expect(await session.get()).toBe(first);
    expect(login).toHaveBeenCalledTimes(1);
  });

  it('keeps a short-lived token half its lifetime', async () => {
    const session = renewingSession(() => Promise.resolve(loggedIn(20)), clock);
    const first = await session.get();
    clock.advance(9_999);
    expect(await session.get()).toBe(first);
    clock.advance(1);
    expect(await session.get()).not.toBe(first);
  });

  it('drops the session Keycloak answers 401 for, and says 401-00001', async () => {
    const login = vi.fn(() => Promise.resolve(loggedIn(300)));
    const session = renewingSession(login, clock);
    const first = await session.get();
    await expect(session.run(() => Promise.reject(answered(401)))).rejects.toMatchObject({
      result: '401-00001',
    });
    expect(await session.get()).not.toBe(first);
    await expect(session.run(() => Promise.reject(answered(404)))).rejects.toMatchObject({
      result: '502-11001',
    });
    expect(login).toHaveBeenCalledTimes(2);
  });

  it('answers 502-11001 for a Keycloak answer no caller handled, its words only in the cause', async () => {
    const session = renewingSession(() => Promise.resolve(loggedIn(300)), clock);
    for (const status of [400, 403, 404, 409]) {
      const answer = Object.assign(answered(status), {
        responseData: { errorMessage: 'Could not find role workspace:w1' },
      });
      const failure = await session.run(() => Promise.reject(answer)).catch((err: unknown) => err);
      expect(failure, String(status)).toBeInstanceOf(AppError);
      expect(failure).toMatchObject({ status: 502, result: '502-11001', cause: answer });
      expect((failure as AppError).message).not.toContain('workspace:w1');
    }
    // What the caller made of an answer, and anything that is no answer, pass unchanged.
    for (const failure of [new AppError('userExists'), new Error('not an answer')]) {
      await expect(session.run(() => Promise.reject(failure))).rejects.toBe(failure);
    }
  });

  it('turns a refused login into 401-00001, and passes the client layer’s failures on', async () => {
    await expect(renewingSession(() => Promise.reject(answered(401))).get()).rejects.toMatchObject({
      result: '401-00001',
    });
    const unreachable = new Error('unreachable');
    await expect(renewingSession(() => Promise.reject(unreachable)).get()).rejects.toBe(
      unreachable,
    );
  });
});
