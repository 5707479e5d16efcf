import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/*
 * A token grant's record waits for the lookup of whether its realm has a log of its own
 * (audit/realm-log.ts) before it reaches the writer (an `/auth` refusal's token is checked
 * before the refusal, by the reach step itself). A shutdown during the lookup must wait for it, within
 * the grace period, and write the record, as it does a change record's. Here the lookup waits
 * for a lock the test holds on the organizations until the replica's statement timeout gives it
 * up (a lookup that fails files the record into master's log, of a token verifies nothing): the
 * gateway's close has begun by then. On a database of the test's own, whose lock holds up no
 * other suite.
 * Ports 21176/21177.
 */

const database = `realmgate_lookup_${randomBytes(4).toString('hex')}`;
const urlOf = (name: string) => {
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${name}`;
  return url.href;
};
const SERVER = () => urlOf('').replace(/\/[^/]*$/, '');

describe('audit records whose realm is being looked up at shutdown', () => {
  let db: Knex;
  let replica: Replica;
  let closed: Promise<void> | undefined;
  let lock: Knex.Transaction | undefined;

  beforeAll(async () => {
    await onPostgresServer(SERVER(), `create database ${database}`);
    db = knex({ client: 'pg', connection: urlOf(database), pool: { min: 0, max: 2 } });
  });

  // Each test closes its replica.
  beforeEach(async () => {
    closed = undefined;
    replica = await startReplica(21176, {
      DATABASE_URL: urlOf(database),
      // The lookup held behind the lock fails after this, well within the grace period's half
      // the audit log's sources are given (SHUTDOWN_GRACE_SECONDS, 10 s).
      DATABASE_STATEMENT_TIMEOUT_MS: '2000',
    });
  }, 120_000);

  afterEach(async () => {
    await lock?.rollback();
    lock = undefined;
    await (closed ?? replica?.gateway.close());
  });

  afterAll(async () => {
    await db?.destroy();
    await onPostgresServer(SERVER(), `drop database if exists ${database} with (force)`);
  });

  /** The replica's lookups of an organization PostgreSQL holds behind the test's lock now. */
  async function lookupsBlocked(): Promise<number> {
    const { rows } = await db.raw<{ rows: { blocked: string }[] }>(
      `select count(*) as blocked from pg_stat_activity
       where datname = ? and wait_event_type = 'Lock' and query like 'select % from "organizations"%'`,
      [database],
    );
    return Number(rows[0]!.blocked);
  }

  async function recordsOf(action: string, realm: string): Promise<AuditRecord[]> {
    const rows = await db<AuditRow>('audit_log')
      .where({ action })
      .where('path', 'like', `%/realms/${realm}/%`)
      .orderBy('seq');
    return rows.map(recordOf);
  }

  it('writes a token grant’s record whose realm lookup is still running when the gateway closes', async () => {
    const realm = `unserved-${randomBytes(4).toString('hex')}`;
    lock = await db.transaction();
    await lock.raw('lock table organizations in access exclusive mode');
    const answer = await requestFrom(
      '127.0.0.1',
      `${replica.url}/auth/realms/${realm}/protocol/openid-connect/token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=password&client_id=app&username=bob&password=wrong',
      },
    );
    expect(answer.status).toBeGreaterThanOrEqual(400);
    // Answered: the record now waits for its realm's lookup, held behind the lock.
    await expect.poll(lookupsBlocked, EVENTUALLY).toBeGreaterThan(0);
    closed = replica.gateway.close();
    await closed;

    const records = await recordsOf('token.grant', realm);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      org: 'master',
      outcome: 'failure',
      details: { grantType: 'password', realm },
    });
  }, 60_000);

  it('writes an /auth refusal’s record whose token is still being verified when the gateway closes', async () => {
    // A token naming a realm this replica has not looked up: the reach step asks whether that
    // realm signed it before anything else (the realm's lookup, held behind the lock, given up
    // at the statement timeout) and answers 503 as it cannot tell; the refusal's record, which
    // cannot know either, goes to the path's realm's log, and the close right after writes it.
    const realm = `unserved-${randomBytes(4).toString('hex')}`;
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const claims = {
      typ: 'Bearer',
      iss: `${replica.config.PUBLIC_URL}/auth/realms/${realm}`,
      sid: `s-${randomBytes(4).toString('hex')}`,
    };
    const token = `${part({ alg: 'RS256', kid: 'k-1' })}.${part(claims)}.c2ln`;
    lock = await db.transaction();
    await lock.raw('lock table organizations in access exclusive mode');
    // On master's path: the record's own realm needs no lookup, only the token's does.
    const answer = await requestFrom('127.0.0.1', `${replica.url}/auth/realms/master/account/`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(answer.status).toBe(503);
    closed = replica.gateway.close();
    await closed;

    const records = (await recordsOf('auth.request', 'master')).filter(
      (record) => record.requestId === answer.headers['x-request-id'],
    );
    // Not verified (the realm could not be looked up): the path's realm's log, no credential.
    expect(records).toMatchObject([{ org: 'master', outcome: 'failure', jobCredential: null }]);
  }, 60_000);
});
