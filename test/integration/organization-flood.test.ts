import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFrom } from '../helpers/from-address.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { manualClock } from '../helpers/test-clock.ts';

/**
 * A client that floods a replica with made-up organization ids spends its own lookups, not
 * everyone's: a real organization the replica has not confirmed yet (it started after the
 * organization was made) still answers from another address after the flood. The replica's
 * clock stands still, so no lookup comes back with time. Ports 18764/18765.
 */
describe('a flood of made-up organization ids', () => {
  let replica: Replica;
  let organization: string;

  beforeAll(async () => {
    // Made before the replica starts: the replica learns of it from the database only.
    organization = await createOrganization([]);
    replica = await startReplica(18764, {}, undefined, manualClock(Date.now()));
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  it('leaves a real organization served from another address, the flooder answered 503 once its lookups run out', async () => {
    const flood = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        requestFrom(
          '127.0.0.2',
          `${replica.url}/api/made-up-${i}-${randomBytes(3).toString('hex')}/platform/workspaces`,
        ),
      ),
    );
    // The replica's clock stands still: no lookup spent is given back during the test.
    expect(flood.every(({ status }) => status === 404 || status === 503)).toBe(true);
    // The real organization (no credentials: 401 once it is found), from another address.
    const real = await requestFrom(
      '127.0.0.1',
      `${replica.url}/api/${organization}/platform/workspaces`,
    );
    expect(real.status).toBe(401);
    // A made-up id from that address is looked up too: 404.
    const other = await requestFrom(
      '127.0.0.1',
      `${replica.url}/api/made-up-${randomBytes(3).toString('hex')}/platform/workspaces`,
    );
    expect(other.status).toBe(404);
    // The flooder's ids past its lookups: the database was not asked, so not 404.
    const refused = flood.filter(({ status }) => status === 503);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]).toMatchObject({
      headers: { 'retry-after': '1' },
      json: { result: '503-00003', data: null },
    });
  });
});
