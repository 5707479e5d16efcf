import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { basicAuth } from '../helpers/api.ts';
import { balancerServes, newSecret, productionFixture } from './production-load.ts';
import { PUBLIC_URL, ROOT, type ComposeStack } from './stack.ts';
import { apiCall, printFigures, tokenGrant } from './walk.ts';

/*
 * Backup and restore on the production profile (docs/operations.md, "Backup and restore"; issue
 * 39, item 4): on one stack, refresh tokens of offline sessions, a job credential, and three
 * endings made before the backup (an offline token revoked by RFC 7009, a session logged out, a
 * single access token revoked by RFC 7009); both databases dumped with the documented commands
 * while the stack serves; the stack taken down with its volumes; a FRESH stack (new project, new
 * volumes, an empty Redis) started as the documented restore says (PostgreSQL and Redis, both
 * dumps restored, then the rest); what was made before must hold there.
 */

const run = promisify(execFile);
const fixture = productionFixture('backup');
const { org, users, workspace: WORKSPACE, forwardedPath } = fixture;
/** Owns the job credential. */
const jobOwner = { username: 'job-owner', password: newSecret() };
/** Logged out before the backup: its access token must stay refused. */
const loggedOut = { username: 'logged-out', password: newSecret() };
/** Had one access token revoked (RFC 7009), and an offline token revoked, before the backup. */
const revoker = { username: 'revoker', password: newSecret() };
const tokensPath = `/api/${org}/platform/users/_current/refresh_tokens`;
/** Where the dumps are written, as an operator's working folder. */
const backupDir = mkdtempSync(path.join(tmpdir(), 'realmgate-backup-'));

let before: ComposeStack;
/** Made before the backup, checked after the restore. */
const made = {
  /** Offline sessions' refresh tokens, one per load user. */
  offline: [] as string[],
  job: '',
  /** An offline token revoked by RFC 7009: its refresh grant must fail. */
  revokedOffline: '',
  /** The access token of a session logged out. */
  loggedOutAccess: '',
  /** An access token revoked alone by RFC 7009 (its session lives on). */
  revokedAccess: '',
};

/**
 * Commands of docs/operations.md run as written, by bash in the backup folder, `$P` naming
 * `stack` as the docs' `P` names the production project.
 */
async function documented(stack: ComposeStack, commands: string): Promise<void> {
  const P = [
    'docker compose',
    `-p ${stack.project}`,
    `--project-directory ${ROOT}`,
    `-f ${path.join(ROOT, 'docker-compose.yml')}`,
    '--profile production',
  ].join(' ');
  await run('bash', ['-c', `set -euo pipefail\nP="${P}"\n${commands}`], {
    cwd: backupDir,
    env: { ...process.env, ...stack.environment },
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** RFC 7009 through the gateway's `/auth`. */
async function revoke(token: string, hint: 'access_token' | 'refresh_token') {
  const answer = await fetch(`${PUBLIC_URL}/auth/realms/${org}/protocol/openid-connect/revoke`, {
    method: 'POST',
    body: new URLSearchParams({ client_id: apiClientIdOf(org), token, token_type_hint: hint }),
  });
  return answer.status;
}

const refresh = (token: string) =>
  tokenGrant(org, { grant_type: 'refresh_token', refresh_token: token });

/** An access token on the forwarded route, four times: both replicas answer. */
async function answersTo(accessToken: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    statuses.push((await apiCall(forwardedPath, `Bearer ${accessToken}`)).status);
  }
  return statuses;
}

/** The job credential refreshed (kept for the next use), and what its access token may do. */
async function jobCredential() {
  const renewed = await refresh(made.job);
  expect(renewed.status, JSON.stringify(renewed.json)).toBe(200);
  made.job = renewed.json.refresh_token;
  const bearer = `Bearer ${renewed.json.access_token}`;
  const write = await apiCall(forwardedPath, bearer, { method: 'POST', body: {} });
  const listed = await apiCall<Array<Record<string, unknown>>>(tokensPath, basicAuth(jobOwner));
  return {
    read: (await apiCall(forwardedPath, bearer)).status,
    write: [write.status, write.json.result],
    nightly: listed.json.data.find((t) => t.name === 'nightly'),
  };
}

describe('backup and restore of the production profile into a fresh stack', () => {
  beforeAll(async () => {
    before = await fixture.startStack();
    await balancerServes();
    await fixture.makeOrganization('Backup', [jobOwner, loggedOut, revoker]);
  }, 900_000);

  afterAll(() => rmSync(backupDir, { recursive: true, force: true }));

  it('before the backup: offline sessions, a job credential, a logout and two RFC 7009 revocations', async () => {
    for (const user of users) {
      const grant = await tokenGrant(org, {
        grant_type: 'password',
        scope: 'openid offline_access',
        ...user,
      });
      expect(grant.status).toBe(200);
      made.offline.push(grant.json.refresh_token);
    }
    made.job = await fixture.jobCredential(jobOwner);

    const session = await tokenGrant(org, {
      grant_type: 'password',
      scope: 'openid',
      ...loggedOut,
    });
    expect(session.status).toBe(200);
    made.loggedOutAccess = session.json.access_token;
    expect(await answersTo(made.loggedOutAccess)).toEqual([200, 200, 200, 200]);
    const logout = await fetch(`${PUBLIC_URL}/auth/realms/${org}/protocol/openid-connect/logout`, {
      method: 'POST',
      body: new URLSearchParams({
        client_id: apiClientIdOf(org),
        refresh_token: session.json.refresh_token,
      }),
    });
    expect(logout.status).toBe(204);

    const offline = await tokenGrant(org, {
      grant_type: 'password',
      scope: 'openid offline_access',
      ...revoker,
    });
    expect(offline.status).toBe(200);
    made.revokedOffline = offline.json.refresh_token;
    expect(await revoke(made.revokedOffline, 'refresh_token')).toBe(200);
    // A session of its own, which lives on: only this access token ends.
    const online = await tokenGrant(org, { grant_type: 'password', scope: 'openid', ...revoker });
    expect(online.status).toBe(200);
    made.revokedAccess = online.json.access_token;
    expect(await answersTo(made.revokedAccess)).toEqual([200, 200, 200, 200]);
    expect(await revoke(made.revokedAccess, 'access_token')).toBe(200);

    const jobNow = await jobCredential();
    expect([jobNow.read, ...jobNow.write]).toEqual([200, 403, '403-30002']);
    expect(await answersTo(made.loggedOutAccess)).toEqual([401, 401, 401, 401]);
    expect(await answersTo(made.revokedAccess)).toEqual([401, 401, 401, 401]);
    expect((await refresh(made.revokedOffline)).status).toBe(400);
  });

  it('backed up with the documented commands while it serves, into a fresh stack restored the same way', async () => {
    const since = performance.now();
    // docs/operations.md, "Backing up": Keycloak's database first, then the platform's.
    await documented(
      before,
      [
        '$P exec -T postgres pg_dump -U realmgate -d keycloak  --format=custom > keycloak.dump',
        '$P exec -T postgres pg_dump -U realmgate -d realmgate --format=custom > realmgate.dump',
      ].join('\n'),
    );
    const dumped = (performance.now() - since) / 1000;
    const sizes = ['keycloak.dump', 'realmgate.dump'].map(
      (file) => statSync(path.join(backupDir, file)).size,
    );
    // The old stack gone with its volumes, its images kept; a fresh one (new project, new
    // volumes, an empty Redis) on the same secrets, as a new host would get them.
    await before.down();
    const restoreStarted = performance.now();
    // "Restoring": PostgreSQL (and Redis) first, the dumps restored before Keycloak and the
    // gateways start, then the rest (`$P up -d load-balancer`, each service awaited here).
    const after = await fixture.startStack({ services: ['postgres', 'redis'], build: false });
    await documented(
      after,
      [
        '$P exec -T postgres pg_restore -U realmgate -d keycloak  --clean --if-exists --no-owner < keycloak.dump',
        '$P exec -T postgres pg_restore -U realmgate -d realmgate --clean --if-exists --no-owner < realmgate.dump',
      ].join('\n'),
    );
    const restored = (performance.now() - restoreStarted) / 1000;
    const upSeconds = await after.upMore(['load-balancer']);
    const rotation = await balancerServes();

    const offline = await Promise.all(
      made.offline.map(async (token) => (await refresh(token)).status),
    );
    const job = await jobCredential();
    const revokedOffline = await refresh(made.revokedOffline);
    const loggedOutAnswers = await answersTo(made.loggedOutAccess);
    const revokedAnswers = await answersTo(made.revokedAccess);
    const logins = await Promise.all(
      [...users, revoker].map(
        async (user) => (await apiCall(forwardedPath, basicAuth(user))).status,
      ),
    );
    const workspaces = await apiCall<Array<{ id: string }>>(
      `/api/platform/organizations/${org}/workspaces`,
      await fixture.adminBearer(),
    );
    printFigures('backup, then restore into a fresh stack', {
      'pg_dump of both databases (while serving)': `${dumped.toFixed(1)} s`,
      'keycloak.dump / realmgate.dump': `${sizes[0]} / ${sizes[1]} bytes`,
      'fresh PostgreSQL and Redis up, both dumps restored': `${restored.toFixed(1)} s`,
      'then Keycloak, gateways, HAProxy up': `${upSeconds.toFixed(1)} s`,
      'then until HAProxy had a replica in rotation on both listeners': `${rotation.toFixed(1)} s`,
      'refresh grants of the offline sessions from before': offline.join(', '),
      'job credential: read / write': `${job.read} / ${job.write.join(' ')}`,
      'offline token revoked before: refresh grant': `${revokedOffline.status} ${revokedOffline.json.error ?? ''}`,
      'access token of a session logged out before': loggedOutAnswers.join(', '),
      'access token revoked (RFC 7009) before': revokedAnswers.join(', '),
      'Basic logins of users made before': logins.join(', '),
    });
    expect(sizes.every((size) => size > 0)).toBe(true);
    expect(offline).toEqual(made.offline.map(() => 200));
    expect([job.read, ...job.write]).toEqual([200, 403, '403-30002']);
    expect(job.nightly).toMatchObject({ workspaces: [WORKSPACE], read_only: true });
    expect(revokedOffline.status).toBe(400);
    expect(loggedOutAnswers).toEqual([401, 401, 401, 401]);
    expect(revokedAnswers).toEqual([401, 401, 401, 401]);
    expect(logins).toEqual(logins.map(() => 200));
    expect(workspaces.json.data.map((w) => w.id)).toEqual([WORKSPACE]);
  }, 900_000);
});
