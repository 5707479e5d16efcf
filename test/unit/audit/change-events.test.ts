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
