import { describe, expect, it } from 'vitest';
import { changeEventsOf } from '../../../src/audit/change-events.ts';

const admin = { realm: 'master', userId: 'u1', username: 'root' };

describe('the audit log of changes', () => {
  it("puts what an administrator did to an organization in master's log and the organization's", () => {
    const events = changeEventsOf(
      {
        action: 'organization.disable',
        outcome: 'success',
        actor: admin,
        target: { organization: 'acme' },
        clientAddress: '10.0.0.1',
        requestId: 'r1',
      },
      1000,
    );
    expect(events.map((e) => e.org)).toEqual(['master', 'acme']);
    expect(events[1]).toMatchObject({
      action: 'organization.disable',
      actorName: 'root',
      details: { organization: 'acme' },
      requestId: 'r1',
    });
  });

  it('records a DPoP switch as a change of its own, from and to, in both logs', () => {
    const entry = (before: string, after: string) => ({
      action: 'token_lifetimes.change',
      outcome: 'success' as const,
      actor: admin,
      target: {
        realm: 'acme',
        fields: ['dpop_bound_access_tokens'],
        dpop_required_before: before,
        dpop_required: after,
      },
      clientAddress: '10.0.0.1',
    });
    const events = changeEventsOf(entry('false', 'true'), 1000);
    expect(events.map((e) => [e.org, e.action])).toEqual([
      ['master', 'token_lifetimes.change'],
      ['acme', 'token_lifetimes.change'],
      ['master', 'dpop.required.changed'],
      ['acme', 'dpop.required.changed'],
    ]);
    expect(events[3]).toMatchObject({
      actorName: 'root',
      details: { realm: 'acme', from: 'false', to: 'true' },
    });
    // Set to what it was: no switch, no record of one.
    expect(changeEventsOf(entry('true', 'true'), 1000).map((e) => e.action)).not.toContain(
      'dpop.required.changed',
    );
  });

  it("puts a change of several realms in each one's log, naming only that realm there", () => {
    const entry = (outcome: 'success' | 'failure') => ({
      action: 'brute_force_detection.apply',
      outcome,
      actor: admin,
      target: {},
      realms: ['master', 'acme', 'globex'],
      clientAddress: '10.0.0.1',
    });
    const events = changeEventsOf(entry('success'), 1000);
    expect(events.map((e) => [e.org, e.details])).toEqual([
      ['master', { realms: ['master', 'acme', 'globex'] }],
      ['acme', { realm: 'acme' }],
      ['globex', { realm: 'globex' }],
    ]);
    expect(changeEventsOf(entry('failure'), 1000).map((e) => e.org)).toEqual(['master']);
  });

  it("keeps a failed change in the caller's log only: its target is what the caller sent", () => {
    const events = changeEventsOf(
      {
        action: 'organization.create',
        outcome: 'failure',
        result: '409-00001',
        actor: admin,
        target: { id: 'anything' },
        clientAddress: '10.0.0.1',
      },
      1000,
    );
    expect(events.map((e) => e.org)).toEqual(['master']);
    expect(events[0]!.result).toBe('409-00001');
  });

  it("puts an event without a caller in the log of the realm it names, else master's", () => {
    const throttle = {
      action: 'login_throttle.start',
      outcome: 'success' as const,
      clientAddress: 'x',
    };
    expect(
      changeEventsOf({ ...throttle, target: { realm: 'acme', username: 'bob' } }, 1).map(
        (e) => e.org,
      ),
    ).toEqual(['acme']);
    expect(changeEventsOf({ ...throttle, target: {} }, 1).map((e) => e.org)).toEqual(['master']);
  });
});
