import { describe, expect, it } from 'vitest';
import { matchAutomationRoute } from '../../src/automation/forward-route.ts';

describe('matchAutomationRoute', () => {
  it('reads the organization and workspace of the forwarded route', () => {
    expect(matchAutomationRoute('/api/acme/workspaces/ws1/ita/menu/list/')).toEqual({
      organization: 'acme',
      workspace: 'ws1',
    });
    expect(matchAutomationRoute('/api/acme/workspaces/ws1/ita')).toEqual({
      organization: 'acme',
      workspace: 'ws1',
    });
    expect(matchAutomationRoute('/api/acme/workspaces/ws1/ita?x=/y')).toEqual({
      organization: 'acme',
      workspace: 'ws1',
    });
  });

  it('leaves every other path to the express app', () => {
    for (const url of [
      undefined,
      '/',
      '/auth/realms/acme',
      '/api/acme/workspaces',
      '/api/acme/workspaces/ws1',
      '/api/acme/workspaces/ws1/',
      '/api/acme/workspaces/ws1/itax/menu',
      '/api/acme/workspaces/ws1/other/ita',
      '/api/acme/workspace/ws1/ita',
      '/api/acme/workspaces/ws1?q=/ita/menu',
      '/api/acme?q=/workspaces/ws1/ita',
      '/api/acme/workspaces//ita',
      '/api/acme/workspaces/w%20s/ita',
      '/api/platform/workspaces/ws1/ita',
    ]) {
      expect(matchAutomationRoute(url), String(url)).toBeUndefined();
    }
  });

  it('passes an organization id through for the realm check to judge', () => {
    // The route function answers 404 for a malformed organization, as express would.
    expect(matchAutomationRoute('/api/ACME/workspaces/ws1/ita')?.organization).toBe('ACME');
  });
});
