import pino from 'pino';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { authenticateRequest, type AuthenticateDeps } from '../../../../src/auth/authenticate.ts';
import { createDpopSwitches } from '../../../../src/auth/dpop/dpop-switch.ts';
import type { Cache } from '../../../../src/cache/cache.ts';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { createGoneRealms } from '../../../../src/auth/gone-realms.ts';
import { createRevocationList } from '../../../../src/auth/revocation.ts';
import { AppError } from '../../../../src/envelope/errors.ts';
import type { Principal } from '../../../../src/tenancy/principal.ts';
import { testPrincipal } from '../../../helpers/principal.ts';
import { manualClock, type TestClock } from '../../../helpers/test-clock.ts';

const METADATA = 'http://gw.example/.well-known/oauth-protected-resource/api/acme';

/**
 * The admission of an unbound Bearer token of realm `acme` whose switch Keycloak answers as
 * `switchOn` (undefined: Keycloak silent); `reads` counts the admin API's answers asked for.
 */
async function setup(
  switchOn: { value: boolean | undefined | 'hanging' | 'gone' | Promise<boolean> },
  shared?: Cache,
  clock: TestClock = manualClock(Date.parse('2026-12-01T06:00:00Z')),
) {
  const reads: string[] = [];
  const switches = createDpopSwitches({
    read: (realm) => {
      reads.push(realm);
      if (switchOn.value === 'hanging') return new Promise<boolean>(() => {});
      if (switchOn.value === 'gone') return Promise.reject(new AppError('organizationNotFound'));
      if (switchOn.value instanceof Promise) return switchOn.value;
      return switchOn.value === undefined
        ? Promise.reject(new Error('Keycloak down'))
        : Promise.resolve(switchOn.value);
    },
    gone: createGoneRealms(clock),
    shared,
    waitMs: 1000,
    clock,
  });
  const now = Math.floor(clock.now() / 1000);
  const lifetime = { issuedAt: now, expiresAt: now + 300 };
  const unbound: Principal = testPrincipal({ ...lifetime, method: 'bearer' });
  const deps: AuthenticateDeps = {
    basic: {
      authenticate: () => testPrincipal({ ...lifetime, method: 'basic' }),
    },
    bearer: { verify: () => unbound },
    dpop: { algs: 'ES256', prove: () => Promise.reject(new Error('no DPoP here')) },
    revocations: await createRevocationList({
      keyPrefix: 'unit:',
      metrics: { revocationApplied: () => undefined },
      logger: pino({ level: 'silent' }),
      clock,
    }),
    activeCheck: { ensureActive: () => undefined },
    clientAddressOf: () => '127.0.0.1',
    resourceMetadataOf: () => METADATA,
    metrics: { authFailure: () => undefined },
    dpopRequired: (realm) => switches.heldIn(realm),
  };
  const request = (authorization: string) =>
    ({ method: 'GET', headers: { authorization }, rawHeaders: [] }) as unknown as IncomingMessage;
  const admit = async (authorization: string) =>
    authenticateRequest(request(authorization), 'acme', '/api/acme/platform/workspaces', deps);
  return { clock, reads, admit, switches, deps };
}

/** The principal `deps`'s verifier answers. */
function unboundOf(deps: AuthenticateDeps): Principal {
  return deps.bearer.verify('acme', 'some.unbound.token') as Principal;
}

describe("an organization's DPoP switch on /api", () => {
  it('refuses an unbound Bearer token with a DPoP challenge, asking Keycloak once a minute', async () => {
    const { clock, reads, admit } = await setup({ value: true });
    for (let i = 0; i < 3; i++) {
      const refused = await admit('Bearer some.unbound.token').catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(AppError);
      expect(refused).toMatchObject({ status: 401, code: 'authenticationFailed' });
      expect((refused as AppError).message).toMatch(/requires DPoP/);
      expect((refused as AppError).headers['www-authenticate']).toBe(
        `DPoP realm="acme", algs="ES256", resource_metadata="${METADATA}", error="invalid_token", ` +
          `error_description="${(refused as AppError).message}"`,
      );
    }
    expect(reads).toEqual(['acme']);
    clock.advance(60_000);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    expect(reads).toEqual(['acme', 'acme']);
  });

  it('answers from the last answer at once while Keycloak is asked again, however slow', async () => {
    const switchOn = { value: false as boolean | 'hanging' };
    const { clock, reads, admit } = await setup(switchOn);
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    switchOn.value = 'hanging';
    clock.advance(60_000);
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    expect(reads).toEqual(['acme', 'acme']);
  });

  it('a worker or replica that never read the switch takes the one another read, through an outage', async () => {
    const clock = manualClock(Date.parse('2026-12-01T06:00:00Z'));
    const shared = createMemoryCache({ maxEntries: 10, clock });
    const reader = await setup({ value: true }, shared, clock);
    await expect(reader.admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    const restarted = await setup({ value: undefined }, shared, clock);
    await expect(restarted.admit('Bearer some.unbound.token')).rejects.toMatchObject({
      status: 401,
      code: 'authenticationFailed',
    });
    await expect(restarted.admit('Bearer some.unbound.token')).rejects.toMatchObject({
      status: 401,
    });
  });

  it("serves the API client's own unbound token, issued before the switch, without asking", async () => {
    const { reads, admit, deps } = await setup({ value: true });
    const ofApiClient: Principal = { ...unboundOf(deps), clientId: '_acme-api' };
    deps.bearer = { verify: () => ofApiClient };
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    expect(reads).toEqual([]);
  });

  it('serves Basic whatever the switch, and Bearer with the switch off', async () => {
    const on = await setup({ value: true });
    const basic = `Basic ${Buffer.from('alice:secret').toString('base64')}`;
    await expect(on.admit(basic)).resolves.toMatchObject({ method: 'basic' });
    const off = await setup({ value: false });
    await expect(off.admit('Bearer some.unbound.token')).resolves.toMatchObject({
      method: 'bearer',
    });
  });

  it('holds a switch set through this replica from the next request, without asking Keycloak', async () => {
    const { reads, admit, switches } = await setup({ value: false });
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    switches.set('acme', true);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    expect(reads).toEqual(['acme']);
  });

  it('keeps the last answer through an outage', async () => {
    const switchOn = { value: true as boolean | undefined };
    const { clock, admit } = await setup(switchOn);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    switchOn.value = undefined;
    clock.advance(5 * 60_000);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
  });

  it('serves while a switch no process read cannot be read, as a re-check; holds it once read', async () => {
    const switchOn = { value: undefined as boolean | undefined };
    const { clock, reads, admit } = await setup(switchOn);
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    // Not asked again at every request while it fails.
    switchOn.value = true;
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    expect(reads).toEqual(['acme']);
    clock.advance(5_000);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    expect(reads).toEqual(['acme', 'acme']);
  });

  it('asks Keycloak once a minute through an outage, not at every request', async () => {
    const switchOn = { value: true as boolean | undefined };
    const { clock, reads, admit } = await setup(switchOn);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    switchOn.value = undefined;
    clock.advance(60_000);
    for (let i = 0; i < 5; i++) {
      await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    }
    expect(reads).toEqual(['acme', 'acme']);
    clock.advance(60_000);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    expect(reads).toEqual(['acme', 'acme', 'acme']);
  });

  it('keeps a switch set through this replica over a read of Keycloak started before it', async () => {
    const clock = manualClock(Date.parse('2026-12-01T06:00:00Z'));
    const shared = createMemoryCache({ maxEntries: 10, clock });
    let answer: (required: boolean) => void = () => undefined;
    const switchOn = { value: false as boolean | Promise<boolean> };
    const { reads, admit, switches } = await setup(switchOn, shared, clock);
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    clock.advance(60_000);
    switchOn.value = new Promise<boolean>((resolve) => (answer = resolve));
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    expect(reads).toEqual(['acme', 'acme']);
    switches.set('acme', true);
    // Keycloak's answer as it was before the switch was set arrives after it.
    answer(false);
    await new Promise((resolve) => setImmediate(resolve));
    expect(switches.requiredIn('acme')).toBe(true);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    await expect(shared.get('dpop-switch:acme')).resolves.toBe('1');
  });

  it('keeps a switch set through this replica over the shared answer asked for before it', async () => {
    const clock = manualClock(Date.parse('2026-12-01T06:00:00Z'));
    const memory = createMemoryCache({ maxEntries: 10, clock });
    await memory.set('dpop-switch:acme', '0', 60_000);
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    // The shared cache's answer as it was when asked, arriving late.
    const shared: Cache = Object.assign(Object.create(memory) as Cache, {
      get: async (key: string) => {
        const value = await memory.get(key);
        await released;
        return value;
      },
    });
    const { admit, switches } = await setup({ value: 'hanging' }, shared, clock);
    const first = admit('Bearer some.unbound.token');
    switches.set('acme', true);
    release();
    await expect(first).rejects.toMatchObject({ status: 401 });
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
  });

  it('forgets an organization deleted, here and in the shared cache, whatever a read in flight answers', async () => {
    const clock = manualClock(Date.parse('2026-12-01T06:00:00Z'));
    const shared = createMemoryCache({ maxEntries: 10, clock });
    let answer: (required: boolean) => void = () => undefined;
    const switchOn = { value: true as boolean | Promise<boolean> };
    const { reads, admit, switches } = await setup(switchOn, shared, clock);
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    clock.advance(60_000);
    // Read again, the deleted realm's answer still on its way.
    switchOn.value = new Promise<boolean>((resolve) => (answer = resolve));
    await expect(admit('Bearer some.unbound.token')).rejects.toMatchObject({ status: 401 });
    switches.forget('acme');
    answer(true);
    await new Promise((resolve) => setImmediate(resolve));
    await expect(shared.get('dpop-switch:acme')).resolves.toBeUndefined();
    // Made again under the id, its switch off: read afresh, not held to the old one's.
    switchOn.value = false;
    await expect(admit('Bearer some.unbound.token')).resolves.toMatchObject({ method: 'bearer' });
    expect(reads).toEqual(['acme', 'acme', 'acme']);
  });

  it('once a first read kept a request waiting its time, takes the default at once until it answers', async () => {
    // Keycloak accepts the read and does not answer: one request of the realm waits for it, not
    // each of them.
    let answer: (required: boolean) => void = () => undefined;
    const reads: string[] = [];
    const clock = manualClock(Date.parse('2026-12-01T06:00:00Z'));
    const switches = createDpopSwitches({
      read: (realm) => {
        reads.push(realm);
        return new Promise<boolean>((resolve) => (answer = resolve));
      },
      gone: createGoneRealms(clock),
      waitMs: 20,
      clock,
    });
    expect(await switches.heldIn('acme')).toBe(false);
    const next = switches.heldIn('acme');
    // Keycloak answers now: a request still waiting for the read would take this answer.
    answer(true);
    expect(await next).toBe(false);
    // Held from the next request once the answer is in, as any first answer.
    await new Promise((resolve) => setImmediate(resolve));
    expect(await switches.heldIn('acme')).toBe(true);
    expect(reads).toEqual(['acme']);
  });

  it('refuses a token of a realm Keycloak no longer has 401 naming the missing realm', async () => {
    const { admit } = await setup({ value: 'gone' });
    for (let i = 0; i < 2; i++) {
      const refused = await admit('Bearer some.unbound.token').catch((err: unknown) => err);
      expect(refused).toMatchObject({ status: 401, code: 'authenticationFailed' });
      expect((refused as AppError).message).toBe(
        "The organization's realm does not exist in Keycloak.",
      );
    }
  });
});
