import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/http/logger.ts';
import { accessTokenOf, basicAuth } from '../helpers/api.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

interface AuditLine {
  audit: true;
  action: string;
  outcome: string;
  result?: string;
  actor?: { realm: string; userId: string; username: string };
  target: Record<string, unknown>;
  clientAddress: string;
  requestId?: string;
}

/** Every change through the API leaves one audit line; the lines are read back from the log. */
describe('audit trail', () => {
  let replica: Replica;
  let output = '';
  let admin: TestUser;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        output += chunk.toString();
        done();
      },
    });
    replica = await startReplica(
      21020,
      {
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: `realmgate-audit:${randomBytes(4).toString('hex')}:`,
        LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '2',
      },
      createLogger('info', sink),
    );
    admin = await createUser('master');
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  const auditLines = (): AuditLine[] =>
    output
      .split('\n')
      .filter((line) => line.includes('"audit":true'))
      .map((line) => JSON.parse(line) as AuditLine);

  async function call(path: string, user: TestUser | string, method = 'GET', body?: unknown) {
    const authorization = typeof user === 'string' ? user : basicAuth(user);
    const res = await fetch(`${replica.url}${path}`, {
      method,
      headers: { authorization, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, requestId: res.headers.get('x-request-id') };
  }

  it('records a provisioning change with who, what, the target, the outcome, where and which request', async () => {
    const id = `audit-${randomBytes(3).toString('hex')}`;
    const { status, requestId } = await call('/api/platform/organizations', admin, 'POST', {
      id,
      name: 'Audited',
    });
    expect(status).toBe(200);
    const line = auditLines().find((l) => l.action === 'organization.create');
    expect(line).toMatchObject({
      outcome: 'success',
      actor: { realm: 'master', username: admin.username },
      target: { id },
      clientAddress: '127.0.0.1',
      requestId,
    });
    expect(line!.actor!.userId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('records a refused change with its result code, and never the password', async () => {
    const secret = `never-logged-${randomBytes(6).toString('hex')}`;
    const { status } = await call('/api/platform/users', admin, 'POST', {
      username: admin.username,
      password: secret,
    });
    expect(status).toBe(409);
    expect(auditLines().find((l) => l.action === 'user.create')).toMatchObject({
      outcome: 'failure',
      result: '409-00001',
      target: { realm: 'master', username: admin.username },
    });
    expect(output).not.toContain(secret);
  });

  it('records a lifetime change with the fields it set', async () => {
    const { status } = await call(
      `/api/platform/organizations/${org}/token-lifetimes`,
      admin,
      'PATCH',
      {
        access_token_lifespan: 7200,
      },
    );
    expect(status).toBe(200);
    expect(auditLines().find((l) => l.action === 'token_lifetimes.change')).toMatchObject({
      outcome: 'success',
      target: { realm: org, fields: ['access_token_lifespan'] },
    });
    // A body refused for a name of the client's choosing: the name is not kept.
    const refused = await call(
      `/api/platform/organizations/${org}/token-lifetimes`,
      admin,
      'PATCH',
      { access_token_lifespan: 3600, ['x'.repeat(300)]: 1 },
    );
    expect(refused.status).toBe(400);
    expect(auditLines().findLast((l) => l.action === 'token_lifetimes.change')).toMatchObject({
      outcome: 'failure',
      target: { realm: org, fields: ['access_token_lifespan'] },
    });
  });

  it('records the revocation of all refresh tokens by their owner', async () => {
    const token = await accessTokenOf(member);
    const { status } = await call(
      `/api/${org}/platform/users/_current/refresh_tokens`,
      `Bearer ${token}`,
      'DELETE',
    );
    expect(status).toBe(200);
    expect(auditLines().find((l) => l.action === 'refresh_tokens.revoke_all')).toMatchObject({
      outcome: 'success',
      actor: { realm: org, username: member.username },
      target: {},
    });
    expect(output).not.toContain(token);
  });

  it('records once when failed logins start being throttled', async () => {
    const target = await createUser(org);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const wrong = { ...target, password: `wrong-${i}` };
      statuses.push((await call(`/api/${org}/platform/workspaces`, wrong)).status);
    }
    expect(statuses).toEqual([401, 401, 429, 429]);
    const started = auditLines().filter(
      (l) => l.action === 'login_throttle.start' && l.target.username === target.username,
    );
    expect(started).toEqual([
      expect.objectContaining({
        outcome: 'success',
        target: {
          scope: 'account_address',
          realm: org,
          username: target.username,
          address: '127.0.0.1',
        },
        clientAddress: '127.0.0.1',
      }),
    ]);
    for (let i = 0; i < 4; i++) expect(output).not.toContain(`wrong-${i}`);
  });
});
