import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callApi } from '../helpers/api.ts';
import { cliOfTestGateway } from '../helpers/cli-run.ts';
import { createUser, keycloakAdmin } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';

// The CLI as automation fleets use it: many jobs of one host, one credentials file.

let root: string;
const secrets = new Set<string>();
/** Bearer logins: what each job prints is checked against the API as is. */
const { realmgate, storedLogins } = cliOfTestGateway(secrets, ['--no-dpop']);

/** The stored login's access token made stale, as it is when a fleet's jobs start later on. */
async function expireCachedToken(configDir: string): Promise<void> {
  const logins = await storedLogins(configDir);
  const past = new Date(Date.now() - 1000).toISOString();
  const stale = logins.map((login) => ({ ...login, accessExpiresAt: past }));
  await writeFile(
    join(configDir, 'credentials.json'),
    JSON.stringify({ version: 1, logins: stale }),
    { mode: 0o600 },
  );
}

describe('realmgate in a fleet of jobs sharing one credentials file', () => {
  let org: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-cli-fleet-'));
    org = await createOrganization(['ws1']);
  });
  afterAll(async () => {
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('jobs that refresh at once on a realm rotating refresh tokens all get a token, and the login lives on', async () => {
    // Keycloak's "Revoke Refresh Token": each refresh token works once; a second use is taken
    // for a stolen token and ends the session.
    const admin = await keycloakAdmin();
    await admin.realms.update(
      { realm: org },
      { revokeRefreshToken: true, refreshTokenMaxReuse: 0 },
    );
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    secrets.add(user.password);
    const configDir = join(root, 'rotating');
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      configDir,
      user.password,
    );
    expect(login.code).toBe(0);
    await expireCachedToken(configDir);

    const jobs = await Promise.all(
      Array.from({ length: 6 }, () => realmgate(['token'], configDir)),
    );
    expect(jobs.map(({ code, stderr }) => ({ code, stderr }))).toEqual(
      jobs.map(() => ({ code: 0, stderr: '' })),
    );
    const workspaces = `/api/${org}/platform/workspaces`;
    for (const { stdout } of jobs) {
      expect((await callApi(workspaces, `Bearer ${stdout.trim()}`)).status).toBe(200);
    }
    // The session was not ended as a reused token's: the next refresh works too.
    await expireCachedToken(configDir);
    const next = await realmgate(['token'], configDir);
    expect(next).toMatchObject({ code: 0, stderr: '' });
    expect((await callApi(workspaces, `Bearer ${next.stdout.trim()}`)).status).toBe(200);
  });
});
