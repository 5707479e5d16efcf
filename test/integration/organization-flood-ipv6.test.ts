import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFrom } from '../helpers/from-address.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { manualClock, type TestClock } from '../helpers/test-clock.ts';

/**
 * The share of organization lookups one client may spend is one host's: an IPv6 host, given a
 * whole /64, that takes a new address of it for every made-up id still spends one share, and a
 * real organization not confirmed yet still answers another client. The clients are named by
 * X-Forwarded-For from a trusted 127.0.0.1 (the IPv6 loopback is one address); the replica's
 * clock stands still, so no lookup comes back with time. Ports 18766/18767.
 */
describe('a flood of made-up organization ids from one IPv6 /64', () => {
  let replica: Replica;
  let organization: string;
  const clock: TestClock = manualClock(Date.now());

  beforeAll(async () => {
    // Made before the replica starts: the replica learns of it from the database only.
    organization = await createOrganization([]);
    replica = await startReplica(18766, { TRUSTED_PROXIES: '127.0.0.1' }, undefined, clock);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  const madeUp = () =>
    `${replica.url}/api/made-up-${randomBytes(4).toString('hex')}/platform/workspaces`;
  const from = (client: string, url: string) =>
    requestFrom('127.0.0.1', url, { headers: { 'x-forwarded-for': client } });

  it('spends one share for the whole /64: a real organization still answers another client', async () => {
    const flood = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        from(`2001:db8:1:2::${(i + 1).toString(16)}`, madeUp()),
      ),
    );
    expect(flood.every(({ status }) => status === 404 || status === 503)).toBe(true);
    expect(flood.filter(({ status }) => status === 503).length).toBeGreaterThan(0);

    // Another host (another /64): the real organization is looked up (no credentials: 401), and
    // so is a made-up id of its own (404).
    expect(
      (await from('2001:db8:1:3::1', `${replica.url}/api/${organization}/platform/workspaces`))
        .status,
    ).toBe(401);
    expect((await from('2001:db8:1:3::1', madeUp())).status).toBe(404);
  });

  it('keeps IPv4 clients apart by address: another address of the same /24 spends its own share', async () => {
    // The replica's lookups and every share full again.
    clock.advance(60_000);
    // 127.0.0.1 is trusted: these speak for themselves, bound to their own source addresses.
    const flood = await Promise.all(
      Array.from({ length: 60 }, () => requestFrom('127.0.0.2', madeUp())),
    );
    expect(flood.filter(({ status }) => status === 503).length).toBeGreaterThan(0);
    expect((await requestFrom('127.0.0.3', madeUp())).status).toBe(404);
  });
});
