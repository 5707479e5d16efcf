import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { reasonOfCode } from '../../../src/audit/api-decisions.ts';
import { NOT_DELIVERED, REASON_OF_STATUS } from '../../../src/audit/token-grants.ts';
import { admissionRefusalsOf } from '../../../src/auth/admission.ts';
import { AUTH_FAILURE_REASONS } from '../../../src/auth/auth-failure.ts';
import type { ErrorCode } from '../../../src/envelope/errors.ts';

/** A route of each shape the admission's steps tell apart: realm, organization, workspace. */
const SHAPES = [
  '/api/platform/x',
  '/api/{organization_id}/platform/x',
  '/api/{organization_id}/workspaces/{workspace_id}/x',
];

/** Refusals of the edge before the admission's steps (edge/route.ts `refusal`). */
const EDGE_REFUSALS: ErrorCode[] = ['organizationNotFound', 'workspaceNotFound'];

/** Every reason an `/api` record can give: an authentication's, else its refusal code's. */
function apiReasons(): string[] {
  const codes = new Set<ErrorCode>(EDGE_REFUSALS);
  for (const path of SHAPES) {
    for (const method of ['GET', 'POST']) {
      for (const code of admissionRefusalsOf({ method, path })) codes.add(code);
    }
  }
  // Always an AuthFailure's (authenticate.ts, reach.ts): its reason is the record's.
  codes.delete('authenticationFailed');
  return [...AUTH_FAILURE_REASONS, ...[...codes].map(reasonOfCode)];
}

describe('docs/audit.md refusal reasons', () => {
  it('names every reason an /api decision and a token grant can be recorded with', async () => {
    const docs = await readFile(new URL('../../../docs/audit.md', import.meta.url), 'utf8');
    const listed = docs.split('\n\n').find((part) => part.startsWith("A refusal's `reason`:"));
    expect(listed).toBeDefined();
    const reasons = [...apiReasons(), ...Object.values(REASON_OF_STATUS), NOT_DELIVERED];
    const missing = [...new Set(reasons)].filter((reason) => !listed!.includes(`\`${reason}\``));
    expect(missing).toEqual([]);
  });
});
