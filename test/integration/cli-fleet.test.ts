import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { access, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { callApi } from '../helpers/api.ts';
import { capturingIo } from '../helpers/cli-io.ts';
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

  it('jobs waiting behind a refresh at a gateway that never answers say what they waited for, and the holder names the gateway', async () => {
    // A "gateway" that accepts connections and never answers.
    const sockets = new Set<Socket>();
    const connected: Array<() => void> = [];
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.resume();
      connected.shift()?.();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const gateway = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`;
    try {
      const configDir = join(root, 'silent');
      await mkdir(configDir, { mode: 0o700 });
      const past = new Date(Date.now() - 1000).toISOString();
      const login = {
        gateway,
        realm: 'acme',
        username: 'alice',
        sessionId: 'session-1',
        refreshToken: 'refresh-token-1',
        loggedInAt: past,
        accessToken: 'access-token-1',
        accessExpiresAt: past,
      };
      await writeFile(
        join(configDir, 'credentials.json'),
        JSON.stringify({ version: 1, logins: [login] }),
        { mode: 0o600 },
      );
      const env = { REALMGATE_URL: gateway, REALMGATE_CONFIG_DIR: configDir };
      const job = (timeoutMs: number) => {
        const { io, output } = capturingIo();
        return runCli(['token'], env, io, { timeoutMs }).then((code) => ({ code, ...output }));
      };
      // The first job holds the lock while its request hangs; a second starts once it waits.
      const reached = new Promise<void>((resolve) => connected.push(resolve));
      const holder = job(15_000);
      await reached;
      // Its own requests would be short: it waits 10 s and three of them for the holder.
      const waiter = await job(100);
      expect(waiter).toEqual({
        code: 6,
        stdout: '',
        stderr:
          `realmgate: gave up after 10 s waiting for a refresh of the login of alice (realm ` +
          `acme) at ${gateway} by another realmgate (pid ${process.pid}), which holds ` +
          `${join(configDir, 'credentials.json.lock')}; retry later\n`,
      });
      expect(await holder).toEqual({
        code: 3,
        stdout: '',
        stderr: `realmgate: no answer from the gateway at ${gateway} within 15 s\n`,
      });
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  }, 60_000);

  it('a job stopped while it holds the lock (Ctrl-C, a CI cancel) removes it: the next job does not wait for a dead one', async () => {
    const sockets = new Set<Socket>();
    const connected: Array<() => void> = [];
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.resume();
      connected.shift()?.();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const gateway = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`;
    try {
      const configDir = join(root, 'interrupted');
      await mkdir(configDir, { mode: 0o700 });
      const past = new Date(Date.now() - 1000).toISOString();
      const login = {
        gateway,
        realm: 'acme',
        username: 'alice',
        sessionId: 'session-1',
        refreshToken: 'refresh-token-1',
        loggedInAt: past,
        accessToken: 'access-token-1',
        accessExpiresAt: past,
      };
      await writeFile(
        join(configDir, 'credentials.json'),
        JSON.stringify({ version: 1, logins: [login] }),
        { mode: 0o600 },
      );
      const env = { REALMGATE_URL: gateway, REALMGATE_CONFIG_DIR: configDir };
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
        // The job's refresh holds the lock while its first request hangs.
        const reached = new Promise<void>((resolve) => connected.push(resolve));
        const job = spawn('node', [join(import.meta.dirname, '../../src/cli/bin.ts'), 'token'], {
          env: { ...process.env, ...env },
          stdio: 'ignore',
        });
        const exited = once(job, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
        await reached;
        job.kill(signal);
        // Ended by the signal itself, as the shell and CI runners expect.
        expect(await exited).toEqual([null, signal]);
        const lock = join(configDir, 'credentials.json.lock');
        await expect(access(lock), signal).rejects.toMatchObject({ code: 'ENOENT' });
      }
      // The next job takes the lock at once and meets the silent gateway itself (3), rather
      // than waiting 10 s for the stopped one and giving up (6).
      const { io, output } = capturingIo();
      const next = await runCli(['token'], env, io, { timeoutMs: 100 });
      expect({ code: next, ...output }).toEqual({
        code: 3,
        stdout: '',
        stderr: `realmgate: no answer from the gateway at ${gateway} within 0.1 s\n`,
      });
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  }, 60_000);
});
