import { describe, expect, it } from 'vitest';
import { routeClassOf } from '../../../src/metrics/route-class.ts';

const segmentsOf = (path: string) => path.slice(1).split('/');

describe('routeClassOf', () => {
  it.each([
    ['POST', '/auth/realms/acme/protocol/openid-connect/token', 'token'],
    ['GET', '/auth/realms/acme/protocol/openid-connect/certs', 'other'],
    ['GET', '/auth/admin/master/console/', 'other'],
    ['GET', '/api/platform/organizations', 'list'],
    ['POST', '/api/platform/organizations', 'provisioning'],
    ['GET', '/api/acme/platform/workspaces', 'list'],
    ['GET', '/api/acme/workspaces/ws1/ita/menu/operation_list/filter', 'list'],
    ['GET', '/api/platform/users/_current/refresh_tokens', 'refresh_tokens'],
    ['DELETE', '/api/acme/platform/users/_current/refresh_tokens/abc', 'refresh_tokens'],
    ['PATCH', '/api/platform/token-lifetimes', 'provisioning'],
    ['POST', '/api/platform/organizations/acme/workspaces', 'provisioning'],
    ['GET', '/api/acme/platform/something', 'other'],
    ['GET', '/api/openapi.json', 'other'],
    ['GET', '/readyz', 'other'],
    ['GET', '/metrics', 'other'],
  ])('%s %s is %s', (method, path, expected) => {
    expect(routeClassOf(segmentsOf(path), method, false)).toBe(expected);
  });

  it('is forwarded when the forwarded route claimed the request, whatever the path', () => {
    expect(routeClassOf(segmentsOf('/api/acme/workspaces/ws1/ita/x'), 'GET', true)).toBe(
      'forwarded',
    );
  });
});
