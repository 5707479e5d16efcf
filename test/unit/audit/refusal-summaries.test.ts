import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../../src/audit/audit-writer.ts';
import {
  REFUSALS_RECORDED_PER_WINDOW,
  REFUSAL_WINDOW_MS,
  summariseRefusals,
} from '../../../src/audit/refusal-summaries.ts';
import { createRefusalRecordLimit } from '../../../src/auth-proxy/refusal-record-limit.ts';
import { apiEvent } from '../../helpers/audit-records.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const refusal = (atMs: number, fields: Partial<AuditEvent> = {}) =>
  apiEvent('acme', atMs, {
    outcome: 'failure',
    actorRealm: null,
    credential: 'basic',
    status: 401,
    result: '401-00002',
    reason: 'wrong_password',
    address: '203.0.113.7',
    ...fields,
  });

describe('summaries of refusals in the audit log', () => {
  it('records the first refusals of a window, then one summary counting the rest', async () => {
    const clock = manualClock();
    const start = clock.now();
    const recorded: AuditEvent[] = [];
    const summaries = summariseRefusals((event) => recorded.push(event), clock);
    for (let i = 0; i < 1000; i++) {
      summaries.record(refusal(clock.now(), { actorName: `guess-${i}` }));
      clock.advance(10);
    }
    expect(recorded).toHaveLength(REFUSALS_RECORDED_PER_WINDOW);
    // The next window opens with the summary of the last.
    clock.advance(REFUSAL_WINDOW_MS);
    summaries.record(refusal(clock.now()));
    expect(recorded).toHaveLength(REFUSALS_RECORDED_PER_WINDOW + 2);
    expect(recorded.at(-2)).toMatchObject({
      org: 'acme',
      action: 'api.request.summary',
      outcome: 'failure',
      actorName: null,
      credential: 'basic',
      status: 401,
      result: '401-00002',
      reason: 'wrong_password',
      address: '203.0.113.7',
      requestId: null,
      atMs: start + 999 * 10,
      details: {
        count: String(1000 - REFUSALS_RECORDED_PER_WINDOW),
        first: new Date(start + REFUSALS_RECORDED_PER_WINDOW * 10).toISOString(),
        last: new Date(start + 999 * 10).toISOString(),
      },
    });
    expect(recorded.at(-1)).toMatchObject({ action: 'api.request', reason: 'wrong_password' });
    await summaries.close();
  });

  it('never summarises an admitted caller, and keeps each address and reason apart', async () => {
    const clock = manualClock();
    const recorded: AuditEvent[] = [];
    const summaries = summariseRefusals((event) => recorded.push(event), clock);
    for (let i = 0; i < 100; i++) summaries.record(apiEvent('acme', clock.now()));
    // Its answer cut (the client went, or the gateway's read failed midway): still its own.
    for (let i = 0; i < 100; i++) {
      const cut = { outcome: 'failure', reason: 'answer_cut' } as const;
      summaries.record(apiEvent('acme', clock.now(), cut));
    }
    expect(recorded).toHaveLength(200);
    for (let i = 0; i < 30; i++) {
      summaries.record(refusal(clock.now()));
      summaries.record(refusal(clock.now(), { address: '198.51.100.1' }));
      summaries.record(refusal(clock.now(), { reason: 'bad_token', credential: 'bearer' }));
    }
    expect(recorded).toHaveLength(200 + 3 * REFUSALS_RECORDED_PER_WINDOW);
    // Shutdown writes the counts of the windows still open.
    await summaries.close();
    const written = recorded.filter((r) => r.action === 'api.request.summary');
    expect(written.map((r) => [r.address, r.reason, r.details.count])).toEqual([
      ['203.0.113.7', 'wrong_password', '20'],
      ['198.51.100.1', 'wrong_password', '20'],
      ['203.0.113.7', 'bad_token', '20'],
    ]);
  });

  it('summarises the refusals of one IPv6 /64 together, under its prefix, whatever address each came from', async () => {
    const clock = manualClock();
    const recorded: AuditEvent[] = [];
    const summaries = summariseRefusals((event) => recorded.push(event), clock);
    // One host, a new address of its /64 for each request.
    for (let i = 0; i < 100; i++) {
      summaries.record(refusal(clock.now(), { address: `2001:db8:7:7::${(i + 1).toString(16)}` }));
    }
    for (let i = 0; i < 30; i++) {
      summaries.record(refusal(clock.now(), { address: '::ffff:198.51.100.1' }));
      summaries.record(refusal(clock.now(), { address: '198.51.100.1' }));
    }
    expect(recorded).toHaveLength(2 * REFUSALS_RECORDED_PER_WINDOW);
    // The refusals recorded one by one keep the address each came from.
    expect(recorded[0]!.address).toBe('2001:db8:7:7::1');
    await summaries.close();
    const written = recorded.filter((r) => r.action === 'api.request.summary');
    expect(written.map((r) => [r.address, r.details.count])).toEqual([
      ['2001:db8:7:7::/64', '90'],
      ['198.51.100.1', '50'],
    ]);
  });

  it('summarises failed token grants per grant type and status, never a successful one', async () => {
    const clock = manualClock();
    const recorded: AuditEvent[] = [];
    const summaries = summariseRefusals((event) => recorded.push(event), clock);
    const grant = (fields: Partial<AuditEvent> = {}, grantType = 'password') =>
      apiEvent('acme', clock.now(), {
        action: 'token.grant',
        outcome: 'failure',
        actorName: `guess-${recorded.length}`,
        credential: null,
        clientId: '_acme-api',
        method: 'POST',
        status: 401,
        reason: 'wrong_credentials',
        address: '203.0.113.7',
        details: { grantType },
        ...fields,
      });
    for (let i = 0; i < 50; i++) {
      summaries.record(grant({ outcome: 'success', status: 200, reason: null }));
      summaries.record(grant());
      // A client and a grant type made up for each request are no new kind.
      summaries.record(grant({ clientId: `made-up-${i}` }, `made-up-${i}`));
      summaries.record(grant({}, 'client_credentials'));
      summaries.record(grant({ status: 429, reason: 'throttled' }));
    }
    expect(recorded).toHaveLength(50 + 4 * REFUSALS_RECORDED_PER_WINDOW);
    await summaries.close();
    const written = recorded.filter((r) => r.action === 'token.grant.summary');
    expect(written).toHaveLength(4);
    expect(written[0]).toMatchObject({
      org: 'acme',
      outcome: 'failure',
      actorName: null,
      clientId: null,
      status: 401,
      reason: 'wrong_credentials',
      address: '203.0.113.7',
      requestId: null,
      details: { grantType: 'password', count: '40' },
    });
    expect(written.map((r) => [r.details.grantType, r.status])).toEqual([
      ['password', 401],
      ['other', 401],
      ['client_credentials', 401],
      ['password', 429],
    ]);
  });

  it('summarises refusals on /auth as their own kind, apart from the same refusals on /api', async () => {
    const clock = manualClock();
    const recorded: AuditEvent[] = [];
    const summaries = summariseRefusals((event) => recorded.push(event), clock);
    const malformed = { credential: 'bearer', status: 400, result: null, reason: 'malformed' };
    for (let i = 0; i < 30; i++) {
      summaries.record(refusal(clock.now(), { ...malformed, action: 'auth.request' }));
      summaries.record(refusal(clock.now(), malformed));
    }
    expect(recorded).toHaveLength(2 * REFUSALS_RECORDED_PER_WINDOW);
    await summaries.close();
    expect(
      recorded.filter((r) => r.action.endsWith('.summary')).map((r) => [r.action, r.details.count]),
    ).toEqual([
      ['auth.request.summary', '20'],
      ['api.request.summary', '20'],
    ]);
  });

  it("records one log's summaries at once when asked, the other logs' windows going on", async () => {
    const clock = manualClock();
    const recorded: AuditEvent[] = [];
    const summaries = summariseRefusals((event) => recorded.push(event), clock);
    for (let i = 0; i < 15; i++) {
      summaries.record(refusal(clock.now()));
      summaries.record(refusal(clock.now(), { org: 'globex', actorRealm: null }));
    }
    expect(recorded).toHaveLength(2 * REFUSALS_RECORDED_PER_WINDOW);
    summaries.closeLog('acme');
    expect(recorded.slice(2 * REFUSALS_RECORDED_PER_WINDOW)).toMatchObject([
      { org: 'acme', action: 'api.request.summary', details: { count: '5' } },
    ]);
    // acme's next refusal opens a window of its own; globex's is still counting.
    summaries.record(refusal(clock.now()));
    summaries.record(refusal(clock.now(), { org: 'globex', actorRealm: null }));
    expect(recorded.at(-1)).toMatchObject({ org: 'acme', action: 'api.request' });
    await summaries.close();
    expect(recorded.at(-1)).toMatchObject({
      org: 'globex',
      action: 'api.request.summary',
      details: { count: '6' },
    });
  });

  it('keeps at most its cap of keys: a new one ends the oldest window, whose run is told', () => {
    const clock = manualClock();
    const limit = createRefusalRecordLimit(clock, { recordedPerWindow: 1, maxKeys: 2 });
    expect(limit.take('a')).toEqual({ recorded: true, ended: [] });
    expect(limit.take('a')).toEqual({ recorded: false, ended: [] });
    limit.take('b');
    const { recorded, ended } = limit.take('c');
    expect(recorded).toBe(true);
    expect(ended).toEqual([{ key: 'a', count: 1, firstMs: clock.now(), lastMs: clock.now() }]);
    expect(limit.drain()).toEqual([]);
  });
});
