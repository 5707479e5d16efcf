import { describe, expect, it } from 'vitest';
import { holdsWorkspace, listsSession, listsWorkspace } from '../../../src/auth/authorize.ts';
import type { TokenReach } from '../../../src/tenancy/principal.ts';
import { testPrincipal } from '../../helpers/principal.ts';

const times = { issuedAt: 0, expiresAt: 1 };
const reachOf = (workspaces: string[]): TokenReach => ({
  workspaces,
  readOnly: true,
  expiresAt: undefined,
});

describe('the workspace list', () => {
  it('shows a member the workspaces it holds the role of, within its reach', () => {
    const member = testPrincipal({ ...times, clientRoles: { 'acme-workspaces': ['ws1', 'ws2'] } });
    expect(['ws1', 'ws2', 'ws3'].filter((ws) => listsWorkspace(member, ws))).toEqual([
      'ws1',
      'ws2',
    ]);
    const narrowed = { ...member, reach: reachOf(['ws2']) };
    expect(['ws1', 'ws2', 'ws3'].filter((ws) => listsWorkspace(narrowed, ws))).toEqual(['ws2']);
  });

  it('shows an organization manager every workspace, within its reach, and opens none', () => {
    for (const role of ['_og-ws-mt', '_og-ws-role-mt']) {
      const manager = testPrincipal({ ...times, realmRoles: ['_organization-manager', role] });
      expect(['ws1', 'ws2'].every((ws) => listsWorkspace(manager, ws))).toBe(true);
      expect(holdsWorkspace(manager, 'ws1')).toBe(false);
      const narrowed = { ...manager, reach: reachOf(['ws2']) };
      expect(['ws1', 'ws2'].filter((ws) => listsWorkspace(narrowed, ws))).toEqual(['ws2']);
    }
  });

  it('takes the manager role from the realm roles only, not a client role of that name', () => {
    const impostor = testPrincipal({
      ...times,
      clientRoles: { 'acme-workspaces': ['_og-ws-mt'], 'acme-api': ['_og-ws-mt'] },
    });
    expect(listsWorkspace(impostor, 'ws1')).toBe(false);
  });
});

describe('the refresh-token list', () => {
  it("shows a token narrowed to workspaces its own session only, any other token all its user's", () => {
    const caller = testPrincipal({ ...times, sessionId: 's1' });
    const sessions = ['s1', 's2'];
    expect(sessions.filter((id) => listsSession(caller, id))).toEqual(['s1', 's2']);
    const readOnly = {
      ...caller,
      reach: { workspaces: undefined, readOnly: true, expiresAt: undefined },
    };
    expect(sessions.filter((id) => listsSession(readOnly, id))).toEqual(['s1', 's2']);
    const narrowed = { ...caller, reach: reachOf(['ws1']) };
    expect(sessions.filter((id) => listsSession(narrowed, id))).toEqual(['s1']);
  });
});
