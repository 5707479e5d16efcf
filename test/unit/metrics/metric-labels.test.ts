import { describe, expect, it } from 'vitest';
import { KEYCLOAK_EVENT_PURPOSES } from '../../../src/audit/keycloak-event-cursors.ts';
import { AUTH_FAILURE_REASONS } from '../../../src/auth/auth-failure.ts';
import {
  AUTH_FAILURE_COUNTED_REASONS,
  AUTH_FAILURE_SCHEMES,
  RECHECK_EVENTS,
} from '../../../src/auth/auth-metrics.ts';
import {
  KEYCLOAK_CALL_KINDS,
  KEYCLOAK_CALL_OUTCOMES,
} from '../../../src/keycloak/keycloak-calls.ts';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { buildInfo } from '../../../src/release/build-info.ts';

/** The values a family shows for `label` before anything was counted (its zeros). */
async function valuesOf(family: string, label: string): Promise<string[]> {
  const metrics = createMetrics({ readiness: {}, build: buildInfo() });
  const found = (await metrics.registry!.getMetricsAsJSON()).find((f) => f.name === family);
  return [...new Set(found!.values.map(({ labels }) => String(labels[label])))];
}

// Each label list is the one its type is read from: a member added to the type is a series at
// once, with no second list in metrics.ts to forget.
describe('closed labels come from the lists their types are read from', () => {
  it('auth failures: every AuthFailure reason, and throttled', async () => {
    expect(AUTH_FAILURE_COUNTED_REASONS).toEqual([...AUTH_FAILURE_REASONS, 'throttled']);
    const family = 'realmgate_auth_failures_total';
    expect(await valuesOf(family, 'reason')).toEqual([...AUTH_FAILURE_COUNTED_REASONS]);
    expect(await valuesOf(family, 'scheme')).toEqual([...AUTH_FAILURE_SCHEMES]);
  });

  it('Keycloak event pulls: every purpose', async () => {
    const values = await valuesOf('realmgate_audit_keycloak_pulls_total', 'purpose');
    expect(values).toEqual([...KEYCLOAK_EVENT_PURPOSES]);
  });

  it("the gateway's Keycloak calls: every kind and outcome", async () => {
    const family = 'realmgate_keycloak_requests_total';
    expect(await valuesOf(family, 'kind')).toEqual([...KEYCLOAK_CALL_KINDS]);
    expect(await valuesOf(family, 'outcome')).toEqual([...KEYCLOAK_CALL_OUTCOMES]);
  });

  it('token re-checks: every event', async () => {
    const values = await valuesOf('realmgate_token_rechecks_total', 'event');
    expect(values).toEqual([...RECHECK_EVENTS]);
  });
});
