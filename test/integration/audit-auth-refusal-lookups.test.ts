import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFrom } from '../helpers/from-address.ts';
import { madeUpToken } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { manualClock } from '../helpers/test-clock.ts';

/**
 * The audit log's record of an `/auth` refusal goes to the log of the realm it concerns, which
 * may need a lookup of the organization: charged to the refused client's share of the
 * replica's lookups, as the admission's are (organization-flood.test.ts), never to what is kept
 * for others. A flood of refusals naming made-up realms (five made-up tokens in a header cost the
 * sender nothing) leaves a real organization the replica has not confirmed yet served from
 * another address. The replica's clock stands still, so no lookup comes back with time. Ports
 * 18768/18769.
 */
describe('a flood of /auth refusals naming made-up realms', () => {
  let replica: Replica;
  let organization: string;

  beforeAll(async () => {
    // Made before the replica starts: the replica learns of it from the database only.
    organization = await createOrganization([]);
    replica = await startReplica(18768, {}, undefined, manualClock(Date.now()));
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  it("leaves a real organization served from another address, the records' lookups spent from the flooder's share", async () => {
    const forged = (sid: string) => madeUpToken({ typ: 'Bearer', sid });
    const tokens = Array.from({ length: 5 }, (_, i) => forged(`s-${i}`)).join(', ');
    const flood = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        requestFrom(
          '127.0.0.2',
          `${replica.url}/auth/realms/made-up-${i}-${randomBytes(3).toString('hex')}/account/`,
          { headers: { authorization: `Bearer ${tokens}` } },
        ),
      ),
    );
    expect(flood.every(({ status }) => status === 400)).toBe(true);
    // The real organization (no credentials: 401 once it is found), from another address.
    const real = await requestFrom(
      '127.0.0.1',
      `${replica.url}/api/${organization}/platform/workspaces`,
    );
    expect(real.status).toBe(401);
  });
});
