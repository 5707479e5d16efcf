import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  createReachStep,
  keycloakReachRefusal,
  LOOKUPS_SPENT,
  UNVERIFIED_LOOKUPS,
  reachRefusal,
} from '../../../src/auth/reach.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import type { TokenDetailsStore } from '../../../src/auth/token-details.ts';
import type { Principal, TokenReach } from '../../../src/tenancy/principal.ts';
import { testPrincipal } from '../../helpers/principal.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const NOW = 1_800_000_000_000;
const reach = (over: Partial<TokenReach>): TokenReach => ({
  workspaces: undefined,
  readOnly: false,
  expiresAt: undefined,
  ...over,
});

describe('reachRefusal', () => {
  it('allows what a reach does not narrow', () => {
    expect(reachRefusal(reach({}), { workspace: 'ws9' }, 'DELETE', NOW)).toBeUndefined();
    expect(reachRefusal(reach({}), {}, 'POST', NOW)).toBeUndefined();
  });

  it('refuses a workspace outside the list; routes naming none are within reach', () => {
    const narrow = reach({ workspaces: ['ws1'] });
    expect(reachRefusal(narrow, { workspace: 'ws1' }, 'GET', NOW)).toBeUndefined();
    expect(reachRefusal(narrow, { workspace: 'ws2' }, 'GET', NOW)).toBe('outsideTokenReach');
    expect(reachRefusal(narrow, {}, 'GET', NOW)).toBeUndefined();
  });

  it('refuses unsafe methods when read-only, whatever their case', () => {
    const readOnly = reach({ readOnly: true });
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'get']) {
      expect(reachRefusal(readOnly, { workspace: 'ws1' }, method, NOW)).toBeUndefined();
    }
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'delete', 'PROPFIND']) {
      expect(reachRefusal(readOnly, { workspace: 'ws1' }, method, NOW)).toBe('readOnlyToken');
    }
  });

  it('refuses every call from its expiry on, before any other reason', () => {
    const ending = reach({ expiresAt: NOW, workspaces: ['ws1'], readOnly: true });
    expect(reachRefusal(ending, { workspace: 'ws1' }, 'GET', NOW - 1)).toBeUndefined();
    expect(reachRefusal(ending, { workspace: 'ws1' }, 'GET', NOW)).toBe('expired');
    expect(reachRefusal(ending, { workspace: 'ws2' }, 'POST', NOW + 1)).toBe('expired');
  });

  it("refuses what is beyond any workspace (the account's, the whole organization's) to a narrowed token only", () => {
    const beyond = { beyondWorkspaces: true };
    expect(reachRefusal(reach({ workspaces: ['ws1'] }), beyond, 'GET', NOW)).toBe(
      'outsideTokenReach',
    );
    expect(reachRefusal(reach({ readOnly: true }), beyond, 'GET', NOW)).toBeUndefined();
    expect(reachRefusal(reach({ readOnly: true }), beyond, 'DELETE', NOW)).toBe('readOnlyToken');
    expect(reachRefusal(reach({}), beyond, 'DELETE', NOW)).toBeUndefined();
  });

  it('reports the workspace before the method', () => {
    const both = reach({ workspaces: ['ws1'], readOnly: true });
    expect(reachRefusal(both, { workspace: 'ws2' }, 'POST', NOW)).toBe('outsideTokenReach');
  });
});

describe('keycloakReachRefusal (a call through /auth)', () => {
  it('holds a read-only token to safe methods and its lifetime, as on /api', () => {
    const readOnly = reach({ readOnly: true, expiresAt: NOW });
    expect(keycloakReachRefusal(readOnly, 'GET', NOW - 1)).toBeUndefined();
    expect(keycloakReachRefusal(readOnly, 'DELETE', NOW - 1)).toBe('readOnlyToken');
    expect(keycloakReachRefusal(readOnly, 'GET', NOW)).toBe('expired');
    expect(keycloakReachRefusal(reach({}), 'DELETE', NOW)).toBeUndefined();
  });

  it('refuses a workspace-narrowed token any call: the account is no workspace', () => {
    const narrow = reach({ workspaces: ['ws1'], readOnly: true, expiresAt: NOW });
    expect(keycloakReachRefusal(narrow, 'GET', NOW - 1)).toBe('outsideTokenReach');
    expect(keycloakReachRefusal(narrow, 'POST', NOW - 1)).toBe('outsideTokenReach');
    expect(keycloakReachRefusal(narrow, 'GET', NOW)).toBe('expired');
  });
});

describe('createReachStep', () => {
  function setup(stored: TokenReach | undefined) {
    const clock = manualClock(NOW);
    const lookups: string[] = [];
    const uses: Array<{ sessionId: string; address: string; userAgent: string | undefined }> = [];
    const store = {
      reachOf: (sessionId: string) => {
        lookups.push(sessionId);
        return Promise.resolve(stored);
      },
      noteUse: (session: { sessionId: string }, use: { address: string; userAgent?: string }) => {
        uses.push({ sessionId: session.sessionId, address: use.address, userAgent: use.userAgent });
        return Promise.resolve();
      },
    } as unknown as TokenDetailsStore;
    const step = createReachStep({
      store,
      cache: createMemoryCache({ maxEntries: 100, clock }),
      clientAddressOf: () => '192.0.2.7',
      maxEntries: 100,
      clock,
      onUseFailed: (err) => {
        throw err;
      },
    });
    return { step, lookups, uses, advance: (ms: number) => clock.advance(ms) };
  }
  const principal = testPrincipal({ issuedAt: NOW / 1000, expiresAt: NOW / 1000 + 3600 });
  const req = (method: string) =>
    ({ method, headers: { 'user-agent': 'ci/1' } }) as unknown as IncomingMessage;

  it('looks a session up once, then decides at once from memory, attaching its reach', async () => {
    const { step, lookups } = setup(reach({ workspaces: ['ws1'], readOnly: true }));
    const first = step.admit(principal, req('GET'), { workspace: 'ws1' });
    expect(first).toBeInstanceOf(Promise);
    expect((await first).reach).toEqual(reach({ workspaces: ['ws1'], readOnly: true }));
    // Remembered: the same step answers without a promise, refusals included.
    const known = step.admit(principal, req('GET'), { workspace: 'ws1' });
    expect(known).not.toBeInstanceOf(Promise);
    expect((known as Principal).reach?.readOnly).toBe(true);
    expect(() => step.admit(principal, req('GET'), { workspace: 'ws2' })).toThrow(
      expect.objectContaining({ code: 'outsideTokenReach' }),
    );
    expect(() => step.admit(principal, req('PUT'), { workspace: 'ws1' })).toThrow(
      expect.objectContaining({ code: 'readOnlyToken' }),
    );
    expect(lookups).toEqual(['s1']);
  });

  it('refuses a call outside the reach on its first sight too (after the look-up)', async () => {
    const { step } = setup(reach({ workspaces: ['ws1'] }));
    await expect(step.admit(principal, req('GET'), { workspace: 'ws2' })).rejects.toMatchObject({
      code: 'outsideTokenReach',
    });
  });

  it('leaves a session without a reach as it is, and Basic logins unlooked-up', async () => {
    const { step, lookups } = setup(undefined);
    expect(await step.admit(principal, req('DELETE'), { workspace: 'ws9' })).toBe(principal);
    expect(step.admit(principal, req('DELETE'), { workspace: 'ws9' })).toBe(principal);
    const basic = { ...principal, method: 'basic' as const };
    expect(step.admit(basic, req('DELETE'), { workspace: 'ws9' })).toBe(basic);
    expect(lookups).toEqual(['s1']);
  });

  it('lets a narrowed token end its own session, and no other, until its lifetime is over', async () => {
    const { step, advance } = setup(
      reach({ workspaces: ['ws1'], readOnly: true, expiresAt: NOW + 1000 }),
    );
    await step.admit(principal, req('GET'), {});
    // Its own session (the principal's `sid`): whatever the method and workspaces.
    expect(step.admit(principal, req('DELETE'), { endsSession: 's1' })).toMatchObject({
      sessionId: 's1',
    });
    // Another session, or a call that ends none: held to its reach.
    for (const endsSession of ['s2', undefined]) {
      expect(() => step.admit(principal, req('DELETE'), { endsSession })).toThrow(
        expect.objectContaining({ code: 'readOnlyToken' }),
      );
    }
    expect(() =>
      step.admit(principal, req('DELETE'), { workspace: 'ws2', endsSession: 's2' }),
    ).toThrow(expect.objectContaining({ code: 'outsideTokenReach' }));
    advance(1000);
    expect(() => step.admit(principal, req('DELETE'), { endsSession: 's1' })).toThrow(
      expect.objectContaining({ code: 'authenticationFailed' }),
    );
  });

  it("refuses a narrowed token its account's routes, but for ending its own session", async () => {
    const { step } = setup(reach({ workspaces: ['ws1'] }));
    await step.admit(principal, req('GET'), { workspace: 'ws1' });
    for (const method of ['GET', 'DELETE']) {
      expect(() => step.admit(principal, req(method), { beyondWorkspaces: true })).toThrow(
        expect.objectContaining({
          code: 'outsideTokenReach',
          message:
            "This token reaches its workspaces only, not its user's account nor the whole organization.",
        }),
      );
    }
    const ending = { beyondWorkspaces: true, endsSession: 's1' };
    expect(step.admit(principal, req('DELETE'), ending)).toMatchObject({ sessionId: 's1' });
    expect(() => step.admit(principal, req('DELETE'), { ...ending, endsSession: 's2' })).toThrow(
      expect.objectContaining({ code: 'outsideTokenReach' }),
    );
  });

  it('refuses every call once the lifetime is over, with 401', async () => {
    const { step, advance } = setup(reach({ expiresAt: NOW + 1000 }));
    await step.admit(principal, req('GET'), {});
    advance(1000);
    expect(() => step.admit(principal, req('GET'), {})).toThrow(
      expect.objectContaining({ code: 'authenticationFailed' }),
    );
  });

  it('notes a session use at most once a minute, with address and user agent', async () => {
    const { step, uses, advance } = setup(undefined);
    await step.admit(principal, req('GET'), {});
    void step.admit(principal, req('GET'), {});
    advance(59_000);
    void step.admit(principal, req('GET'), {});
    expect(uses).toEqual([{ sessionId: 's1', address: '192.0.2.7', userAgent: 'ci/1' }]);
    advance(1000);
    void step.admit(principal, req('GET'), {});
    expect(uses).toHaveLength(2);
  });

  it('serves, with the database down, what another process read of a session, and refuses what nobody read', async () => {
    const clock = manualClock(NOW);
    const cache = createMemoryCache({ maxEntries: 100, clock });
    let databaseDown = false;
    const store = {
      reachOf: () =>
        databaseDown
          ? Promise.reject(new Error('database down'))
          : Promise.resolve(reach({ workspaces: ['ws1'] })),
      noteUse: () => Promise.resolve(),
    } as unknown as TokenDetailsStore;
    const stepOf = () =>
      createReachStep({
        store,
        cache,
        clientAddressOf: () => '192.0.2.7',
        maxEntries: 100,
        clock,
        onUseFailed: () => undefined,
      });
    await stepOf().admit(principal, req('GET'), { workspace: 'ws1' });
    databaseDown = true;
    // Another worker or replica, which never saw the session: the shared cache answers.
    const other = stepOf();
    expect(
      (await other.admit(principal, req('GET'), { workspace: 'ws1' })).reach?.workspaces,
    ).toEqual(['ws1']);
    expect(() => other.admit(principal, req('GET'), { workspace: 'ws2' })).toThrow(
      expect.objectContaining({ code: 'outsideTokenReach' }),
    );
    const unseen = testPrincipal({
      sessionId: 's-unseen',
      issuedAt: NOW / 1000,
      expiresAt: NOW / 1000 + 3600,
    });
    await expect(stepOf().admit(unseen, req('GET'), { workspace: 'ws1' })).rejects.toThrow(
      'database down',
    );
  });
});

describe('createReachStep: sessions an unverified token names (/auth)', () => {
  /** Records of `recorded` only; every other session id is made up. */
  function setup(recorded: Record<string, TokenReach | undefined>) {
    const clock = manualClock(NOW);
    const cache = createMemoryCache({ maxEntries: 1000, clock });
    const lookups: string[] = [];
    const store = {
      recordOf: (sessionId: string) => {
        lookups.push(sessionId);
        return Promise.resolve(sessionId in recorded ? { reach: recorded[sessionId] } : undefined);
      },
    } as unknown as TokenDetailsStore;
    const step = createReachStep({
      store,
      cache,
      clientAddressOf: (req) => req.socket.remoteAddress!,
      maxEntries: 1000,
      clock,
      onUseFailed: () => undefined,
    });
    return { step, cache, lookups, advance: (ms: number) => clock.advance(ms) };
  }
  const from = (address: string) => ({ socket: { remoteAddress: address } }) as IncomingMessage;
  const madeUp = (n: number) => Array.from({ length: n }, (_, i) => `made-up-${i}`);

  it('shares a recorded reach and a recorded "none", and nothing of a session the store has no record of', async () => {
    const { step, cache, lookups } = setup({ job: reach({ readOnly: true }), plain: undefined });
    const client = from('192.0.2.7');
    expect(await step.reachOf('job', client)).toEqual(reach({ readOnly: true }));
    expect(await step.reachOf('plain', client)).toBeUndefined();
    expect(await step.reachOf('made-up', client)).toBeUndefined();
    expect(await cache.get('token-reach:job')).toBe(JSON.stringify(reach({ readOnly: true })));
    expect(await cache.get('token-reach:plain')).toBe('none');
    expect(await cache.get('token-reach:made-up')).toBeUndefined();
    // Each remembered by this process: asked once.
    for (const sessionId of ['job', 'plain', 'made-up']) await step.reachOf(sessionId, client);
    expect(lookups).toEqual(['job', 'plain', 'made-up']);
  });

  it("looks a session up once for a client's requests at once, spending one of its lookups", async () => {
    const { clientPerSecond } = UNVERIFIED_LOOKUPS;
    const { step, lookups } = setup({ job: reach({ readOnly: true }) });
    const client = from('192.0.2.8');
    // More requests at once with one token than the client's share: all answered by one lookup.
    const answers = await Promise.all(
      Array.from({ length: clientPerSecond * 2 }, () => step.reachOf('job', client)),
    );
    expect(answers).toEqual(answers.map(() => reach({ readOnly: true })));
    expect(lookups).toEqual(['job']);
    // The rest of its share is still there.
    const others = await Promise.all(
      madeUp(clientPerSecond - 1).map((sid) => step.reachOf(sid, client)),
    );
    expect(others.filter((answer) => answer === LOOKUPS_SPENT)).toHaveLength(0);
  });

  it("spends one client's lookups, then answers LOOKUPS_SPENT; other clients and known sessions are still served", async () => {
    const { perSecond, clientPerSecond, keptForOthers } = UNVERIFIED_LOOKUPS;
    const { step, lookups, advance } = setup({ job: reach({ readOnly: true }) });
    const flooder = from('192.0.2.66');
    await step.reachOf('job', flooder);
    // A host's jobs refreshing together: its whole share is served.
    const burst = await Promise.all(
      madeUp(clientPerSecond - 1).map((sid) => step.reachOf(sid, flooder)),
    );
    expect(burst.filter((answer) => answer === LOOKUPS_SPENT)).toHaveLength(0);
    // Then the replica's while more than `keptForOthers` are left, then none.
    const flood = await Promise.all(
      madeUp(perSecond)
        .map((sid) => `more-${sid}`)
        .map((sid) => step.reachOf(sid, flooder)),
    );
    const served = perSecond - keptForOthers - clientPerSecond;
    expect(flood.filter((answer) => answer === undefined)).toHaveLength(served);
    expect(flood.filter((answer) => answer === LOOKUPS_SPENT)).toHaveLength(perSecond - served);
    expect(lookups).toHaveLength(perSecond - keptForOthers);
    // Known to this process: no lookup needed, so none refused.
    expect(await step.reachOf('job', flooder)).toEqual(reach({ readOnly: true }));
    expect(await step.reachOf('made-up-0', flooder)).toBeUndefined();
    // Another address still has the lookups kept for the others.
    expect(await step.reachOf('other', from('198.51.100.1'))).toBeUndefined();
    expect(await step.reachOf('made-up-other', flooder)).toBe(LOOKUPS_SPENT);
    // A second later the flooder has lookups again.
    advance(1000);
    expect(await step.reachOf('made-up-other', flooder)).toBeUndefined();
  });

  it("looks up a session Keycloak confirmed (a refresh grant's 200) on no client's lookups, once", async () => {
    const { perSecond } = UNVERIFIED_LOOKUPS;
    const { step, lookups } = setup({ job: reach({ readOnly: true }), plain: undefined });
    const flooder = from('192.0.2.66');
    // The replica's lookups spent by one client and the others' (the clock stands still).
    for (const address of ['192.0.2.66', '198.51.100.1', '203.0.113.1']) {
      await Promise.all(
        madeUp(perSecond).map((sid) => step.reachOf(`${address}-${sid}`, from(address))),
      );
    }
    expect(await step.reachOf('job', flooder)).toBe(LOOKUPS_SPENT);
    expect(step.rememberedReachOf('job')).toBeUndefined();
    const before = lookups.length;
    const confirmed = await Promise.all([
      step.confirmedReachOf('job'),
      step.confirmedReachOf('job'),
    ]);
    expect(confirmed).toEqual([reach({ readOnly: true }), reach({ readOnly: true })]);
    expect(await step.confirmedReachOf('plain')).toBeUndefined();
    expect(lookups.slice(before)).toEqual(['job', 'plain']);
    // Remembered now, for the next refresh grant before Keycloak and for any request.
    expect(step.rememberedReachOf('job')).toEqual({ reach: reach({ readOnly: true }) });
    expect(step.rememberedReachOf('plain')).toEqual({ reach: undefined });
    expect(await step.reachOf('job', flooder)).toEqual(reach({ readOnly: true }));
  });
});
