import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

const GUESSER = '127.0.0.41';
const MAX_FAILURES = 3;

/**
 * The login throttle's record names the realm and user name of the login form it throttled,
 * both taken from the request: anyone can post to `/auth/realms/<anything>/login-actions/...`
 * (Keycloak answers an unknown realm in JSON, which the throttle counts as a refused password).
 * A realm the gateway does not serve must not get a log of its own (a head row, a chain the
 * checkpointer signs every minute), a look-alike of an organization's name either; a name too
 * long for the database's index must not hold back the log. Ports 21740-21741.
 */
describe("audit log: the login throttle's record of a realm the gateway does not serve", () => {
  let replica: Replica | undefined;
  let org: string;

  beforeAll(async () => {
    replica = await startReplica(21740, {
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: String(MAX_FAILURES),
    });
    org = await createOrganization(['ws1']);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  /** Posts a wrong password to `realm`'s login form until the throttle refuses it. */
  async function guessUntilThrottled(realm: string, username: string): Promise<void> {
    const statuses: number[] = [];
    for (let i = 0; i <= MAX_FAILURES; i++) {
      const res = await requestFrom(
        GUESSER,
        `${replica!.url}/auth/realms/${realm}/login-actions/authenticate`,
        {
          method: 'POST',
          headers: {
            accept: 'application/json',
            'content-type': 'application/x-www-form-urlencoded',
          },
          body: new URLSearchParams({ username, password: 'y' }).toString(),
        },
      );
      statuses.push(res.status);
    }
    expect(statuses.at(-1)).toBe(429);
  }

  it("keeps a made-up or look-alike realm's throttle in master's log, bounded; a served realm's in its own", async () => {
    const since = new Date().toISOString();
    const long = `r${randomBytes(2250).toString('base64url')}`.slice(0, 3000);
    const lookAlike = org.toUpperCase();
    const longName = `u${'x'.repeat(4000)}`;
    await guessUntilThrottled(long, longName);
    await guessUntilThrottled(lookAlike, 'x');
    const servedUser = `guessed${randomBytes(4).toString('hex')}`;
    await guessUntilThrottled(org, servedUser);

    // Its shutdown writes its spool.
    await replica!.gateway.close();
    replica = undefined;

    const heads = await testDb()('audit_log_heads')
      .whereIn('org', [long, long.slice(0, 255), lookAlike])
      .pluck<string[]>('org');
    expect(heads).toEqual([]);

    const master: AuditRecord[] = (
      await testDb()<AuditRow>('audit_log').where({ org: 'master' }).orderBy('seq')
    )
      .map(recordOf)
      .filter((r) => r.address === GUESSER && r.at >= since && r.action === 'login_throttle.start');
    expect(master.map((r) => r.details.realm)).toEqual([long.slice(0, 255), lookAlike]);
    expect(master.map((r) => r.details.username)).toEqual([longName.slice(0, 255), 'x']);

    const theirs = (await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq'))
      .map(recordOf)
      .filter((r) => r.address === GUESSER && r.action === 'login_throttle.start');
    expect(theirs.map((r) => r.details)).toEqual([
      { scope: 'account_address', realm: org, username: servedUser, address: GUESSER },
    ]);
  });
});
