import { describe, expect, it } from 'vitest';
import { reachRefusal } from '../../../src/auth/reach.ts';
import type { TokenReach } from '../../../src/tenancy/principal.ts';

const NOW = 1_800_000_000_000;
const reach = (over: Partial<TokenReach>): TokenReach => ({
  workspaces: undefined,
  readOnly: false,
  expiresAt: undefined,
  ...over,
});

describe('reachRefusal', () => {
  it('allows what a reach does not narrow', () => {
    expect(reachRefusal(reach({}), 'ws9', 'DELETE', NOW)).toBeUndefined();
    expect(reachRefusal(reach({}), undefined, 'POST', NOW)).toBeUndefined();
  });

  it('refuses a workspace outside the list; routes naming none are within reach', () => {
    const narrow = reach({ workspaces: ['ws1'] });
    expect(reachRefusal(narrow, 'ws1', 'GET', NOW)).toBeUndefined();
    expect(reachRefusal(narrow, 'ws2', 'GET', NOW)).toBe('outsideTokenReach');
    expect(reachRefusal(narrow, undefined, 'GET', NOW)).toBeUndefined();
  });

  it('refuses unsafe methods when read-only, whatever their case', () => {
    const readOnly = reach({ readOnly: true });
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'get']) {
      expect(reachRefusal(readOnly, 'ws1', method, NOW)).toBeUndefined();
    }
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'delete', 'PROPFIND']) {
      expect(reachRefusal(readOnly, 'ws1', method, NOW)).toBe('readOnlyToken');
    }
  });

  it('refuses every call from its expiry on, before any other reason', () => {
    const ending = reach({ expiresAt: NOW, workspaces: ['ws1'], readOnly: true });
    expect(reachRefusal(ending, 'ws1', 'GET', NOW - 1)).toBeUndefined();
    expect(reachRefusal(ending, 'ws1', 'GET', NOW)).toBe('expired');
    expect(reachRefusal(ending, 'ws2', 'POST', NOW + 1)).toBe('expired');
  });

  it('reports the workspace before the method', () => {
    const both = reach({ workspaces: ['ws1'], readOnly: true });
    expect(reachRefusal(both, 'ws2', 'POST', NOW)).toBe('outsideTokenReach');
  });
});
