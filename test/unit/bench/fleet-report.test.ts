import { describe, expect, it } from 'vitest';
import type { Answer, JobOutcome } from '../../../bench/fleet-plan.ts';
import type { FleetJob } from '../../../bench/fleet-plan.ts';
import { formatFleet, summarizeFleet } from '../../../bench/fleet-report.ts';

const job = (host: string, wave: number, stale = false): FleetJob => ({
  wave,
  host,
  kind: 'grant',
  account: { stale, index: 0 },
});
const answer = (status: number, ms: number, more: Partial<Answer> = {}): Answer => ({
  status,
  ms,
  ...more,
});
const api = (status: number, ms: number) => [
  { call: 'forwarded' as const, ...answer(status, ms) },
  { call: 'list' as const, ...answer(status, ms + 1) },
];

// Host .20 has a stale job and gets a right login refused in wave 2; .21 is served throughout.
const outcomes: JobOutcome[] = [
  { job: job('127.0.0.20', 0), logins: [answer(200, 100)], api: api(200, 2) },
  {
    job: job('127.0.0.20', 1),
    logins: [answer(429, 3, { error: 'too_many_attempts', retryAfter: '280' })],
    api: [],
  },
  { job: job('127.0.0.21', 0), logins: [answer(200, 300)], api: api(200, 4) },
  { job: job('127.0.0.21', 1), logins: [answer(200, 200)], api: api(502, 6) },
  // The deadline stopped this one before its login.
  { job: job('127.0.0.21', 1), logins: [], api: [] },
  {
    job: job('127.0.0.20', 0, true),
    logins: [answer(401, 50, { error: 'invalid_grant' }), answer(429, 1, { retryAfter: '299' })],
    api: [],
  },
];

describe('summarizeFleet', () => {
  const summary = summarizeFleet(outcomes, { right: 3, stale: 1 });

  it('counts right logins refused by answer, host and wave, apart from the stale attempts', () => {
    expect(summary.jobs).toEqual({ right: 5, stale: 1 });
    expect(summary.rightLogins).toMatchObject({
      total: 4,
      notTried: 1,
      refused: 1,
      throttled: 1,
      refusedBy: { '429 too_many_attempts': 1 },
      refusedByHostAndWave: { '127.0.0.20 2': 1 },
      retryAfter: ['280'],
    });
    expect(summary.staleAttempts).toEqual({
      total: 2,
      answeredBy: { '401 invalid_grant': 1, '429': 1 },
    });
  });

  it('takes percentiles over what was served only', () => {
    // Served right logins: 100, 200, 300 ms (nearest rank).
    expect(summary.rightLogins).toMatchObject({ served: 3, p50Ms: 200, p99Ms: 300 });
    expect(summary.api).toMatchObject({ total: 6, failed: 2, served: 4, p50Ms: 3, p99Ms: 5 });
    expect(summary.api.failedBy).toEqual({ '502': 2 });
  });

  it('divides the grants Keycloak saw by the jobs of each kind', () => {
    expect(summary.keycloakGrants).toEqual({
      right: 3,
      stale: 1,
      perRightJob: 0.6,
      perStaleJob: 1,
    });
  });
});

describe('formatFleet', () => {
  it('prints the figures and a host-by-wave table of refused right logins', () => {
    const summary = summarizeFleet(outcomes, { right: 3, stale: 1 });
    const text = formatFleet(summary, ['127.0.0.20', '127.0.0.21'], ['127.0.0.20'], 2);
    expect(text).toContain(
      '| right logins refused (target 0) | 1 of 4; 1 jobs stopped before their login |',
    );
    expect(text).toContain('| of which by the login throttle (429) | 1 |');
    expect(text).toContain('| answers to the right logins refused | 429 too_many_attempts: 1 |');
    expect(text).toContain('| Keycloak password grants, right accounts | 3 (0.60 per right job) |');
    expect(text).toContain('| 127.0.0.20 (a stale job) | 0 | 1 |');
    expect(text).toContain('| 127.0.0.21 | 0 | 0 |');
  });
});
