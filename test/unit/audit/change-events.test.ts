import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../../src/audit/audit-writer.ts';
import { changeEventsOf, recordChanges } from '../../../src/audit/change-events.ts';
import { pendingLookups } from '../../../src/audit/realm-log.ts';
import type { AuditEntry } from '../../../src/http/audit.ts';

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

  describe('recorded', () => {
    /** What `recordChanges` records of `entry`, with `served` the realms that have a log. */
    async function recorded(
      entry: AuditEntry,
      served: (realm: string) => boolean | Promise<boolean>,
    ): Promise<{ events: AuditEvent[]; asked: [string, string | undefined][] }> {
      const events: AuditEvent[] = [];
      const asked: [string, string | undefined][] = [];
      const pending = pendingLookups();
      recordChanges({
        record: (event) => events.push(event),
        isLog: async (realm, client) => {
          asked.push([realm, client]);
          return served(realm);
        },
        pending,
        now: () => 1000,
      })(entry);
      // A shutdown's: once the records of what was kept are handed on.
      await pending.settled();
      return { events, asked };
    }
    const throttle = (realm: string): AuditEntry => ({
      action: 'login_throttle.start',
      outcome: 'success',
      target: { scope: 'account_address', realm, username: 'bob', address: '10.0.0.9' },
      clientAddress: '10.0.0.9',
    });

    it("keeps an event without a caller naming a realm the gateway does not serve in master's log, naming it", async () => {
      const { events, asked } = await recorded(throttle('ACME'), (realm) => realm === 'acme');
      expect(asked).toEqual([['ACME', '10.0.0.9']]);
      expect(events.map((e) => [e.org, e.details.realm])).toEqual([['master', 'ACME']]);
    });

    it('gives it the log of a realm the gateway serves', async () => {
      const { events } = await recorded(throttle('acme'), (realm) => realm === 'acme');
      expect(events.map((e) => [e.org, e.details.realm])).toEqual([['acme', 'acme']]);
    });

    it("keeps it in master's log when whether the realm is served could not be told", async () => {
      const { events } = await recorded(throttle('acme'), () =>
        Promise.reject(new Error('database down')),
      );
      expect(events.map((e) => e.org)).toEqual(['master']);
    });

    it('asks nothing of a change a caller made: the route that made it found the realm', async () => {
      const { events, asked } = await recorded(
        {
          action: 'organization.delete',
          outcome: 'success',
          actor: admin,
          target: { organization: 'acme' },
          clientAddress: '10.0.0.1',
        },
        () => false,
      );
      expect(asked).toEqual([]);
      expect(events.map((e) => e.org)).toEqual(['master', 'acme']);
    });
  });
});
