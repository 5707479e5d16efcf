import { describe, expect, it } from 'vitest';
import { AUDIT_RECORD_OUTCOMES } from '../../../src/audit/audit-writer.ts';
import { KEYCLOAK_EVENT_PURPOSES } from '../../../src/audit/keycloak-event-cursors.ts';
import { KEYCLOAK_EVENT_PULL_OUTCOMES } from '../../../src/audit/keycloak-event-pull.ts';
import { AUTH_FAILURE_REASONS } from '../../../src/auth/auth-failure.ts';
import {
  AUTH_CACHES,
  AUTH_FAILURE_COUNTED_REASONS,
  AUTH_FAILURE_SCHEMES,
  RECHECK_EVENTS,
  REVOCATION_SOURCES,
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

  it('Keycloak event pulls: every purpose and outcome', async () => {
    const family = 'realmgate_audit_keycloak_pulls_total';
    expect(await valuesOf(family, 'purpose')).toEqual([...KEYCLOAK_EVENT_PURPOSES]);
    expect(await valuesOf(family, 'outcome')).toEqual([...KEYCLOAK_EVENT_PULL_OUTCOMES]);
  });

  it('cache lookups, revocations applied, audit records: every cache, source and outcome', async () => {
    expect(await valuesOf('realmgate_cache_lookups_total', 'cache')).toEqual([...AUTH_CACHES]);
    const sources = await valuesOf('realmgate_revocations_applied_total', 'source');
    expect(sources).toEqual([...REVOCATION_SOURCES]);
    const outcomes = await valuesOf('realmgate_audit_records_total', 'outcome');
    expect(outcomes).toEqual([...AUDIT_RECORD_OUTCOMES]);
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

/** The value of the series of `family` whose labels are exactly `labels`. */
async function seriesValue(
  metrics: ReturnType<typeof createMetrics>,
  family: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const found = (await metrics.registry!.getMetricsAsJSON()).find((f) => f.name === family);
  return found!.values.find(
    (series) =>
      Object.keys(series.labels).length === Object.keys(labels).length &&
      Object.entries(labels).every(([name, value]) => series.labels[name] === value),
  )?.value;
}

// Two-valued labels too: each value is counted under its own series, never the other's.
describe('each value of a two-valued label is counted under its own series', () => {
  it('cache lookups: each cache, hit and miss', async () => {
    const metrics = createMetrics({ readiness: {}, build: buildInfo() });
    metrics.cacheLookup('verified_token', true);
    metrics.cacheLookup('basic_login', true);
    metrics.cacheLookup('basic_login', true);
    metrics.cacheLookup('basic_login', false);
    const family = 'realmgate_cache_lookups_total';
    expect(await seriesValue(metrics, family, { cache: 'verified_token', result: 'hit' })).toBe(1);
    expect(await seriesValue(metrics, family, { cache: 'verified_token', result: 'miss' })).toBe(0);
    expect(await seriesValue(metrics, family, { cache: 'basic_login', result: 'hit' })).toBe(2);
    expect(await seriesValue(metrics, family, { cache: 'basic_login', result: 'miss' })).toBe(1);
  });

  it('revocations applied: local and peer', async () => {
    const metrics = createMetrics({ readiness: {}, build: buildInfo() });
    metrics.revocationApplied('peer');
    const family = 'realmgate_revocations_applied_total';
    expect(await seriesValue(metrics, family, { source: 'local' })).toBe(0);
    expect(await seriesValue(metrics, family, { source: 'peer' })).toBe(1);
  });

  it('audit records: written and lost', async () => {
    const metrics = createMetrics({ readiness: {}, build: buildInfo() });
    metrics.auditRecords('written', 3);
    metrics.auditRecords('lost', 2);
    const family = 'realmgate_audit_records_total';
    expect(await seriesValue(metrics, family, { outcome: 'written' })).toBe(3);
    expect(await seriesValue(metrics, family, { outcome: 'lost' })).toBe(2);
  });

  it('Keycloak event pulls: each purpose, ok and failed', async () => {
    const metrics = createMetrics({ readiness: {}, build: buildInfo() });
    metrics.keycloakEventPull('failed', 'auth');
    metrics.keycloakEventPull('ok', 'audit');
    metrics.keycloakEventPull('ok', 'audit');
    const family = 'realmgate_audit_keycloak_pulls_total';
    expect(await seriesValue(metrics, family, { purpose: 'audit', outcome: 'ok' })).toBe(2);
    expect(await seriesValue(metrics, family, { purpose: 'audit', outcome: 'failed' })).toBe(0);
    expect(await seriesValue(metrics, family, { purpose: 'auth', outcome: 'ok' })).toBe(0);
    expect(await seriesValue(metrics, family, { purpose: 'auth', outcome: 'failed' })).toBe(1);
  });
});
