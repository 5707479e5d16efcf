import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

const PORT = 21010;

/** SHUTDOWN_GRACE_SECONDS where the grace period must not end during the test. */
const LONG_GRACE_SECONDS = 40;

/**
 * `src/main.ts` as operators run it, in a process of its own, stopped with real signals, in
 * front of an upstream that answers when the test lets it (or never). The tests wait for events
 * (a request arriving, a log line, the exit); the only time they measure is the grace period,
 * and only from below: a process cannot end it early by being slow.
 */
describe('graceful shutdown on SIGTERM', () => {
  let upstream: Server;
  let upstreamUrl: string;
  let arrived: string[] = [];
  /** Lets the upstream answer the request to `/slow` it holds. */
  let answerSlow: () => void = () => undefined;
  let org: string;
  let member: TestUser;
  let gateway: ChildProcess | undefined;
  let output = '';

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      if (req.url!.includes('/quick')) {
        res.end('{"data":"quick","message":"SUCCESS","result":"000-00000"}');
        return;
      }
      arrived.push(req.url!);
      if (req.url!.includes('/forever')) return;
      answerSlow = () => res.end('{"data":"slow","message":"SUCCESS","result":"000-00000"}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterEach(() => {
    gateway?.kill('SIGKILL');
    gateway = undefined;
    arrived = [];
  });

  afterAll(async () => {
    upstream?.closeAllConnections();
    await new Promise((resolve) => upstream?.close(resolve));
    await closeTestDb();
  });

  async function startGatewayProcess(
    graceSeconds: number,
    settings: Record<string, string> = {},
  ): Promise<ChildProcess> {
    const env = testEnv();
    output = '';
    const child = spawn(process.execPath, ['src/main.ts'], {
      env: {
        PATH: process.env.PATH,
        HOST: '127.0.0.1',
        PORT: String(PORT),
        ADMIN_PORT: String(PORT + 1),
        PUBLIC_URL: env.publicUrl,
        KEYCLOAK_URL: env.keycloakUrl,
        KEYCLOAK_ADMIN_PASSWORD: env.keycloakAdminPassword,
        KEYCLOAK_CLIENT_SECRET: env.gatewayClientSecret,
        DATABASE_URL: env.databaseUrl,
        REDIS_URL: env.redisUrl,
        REDIS_KEY_PREFIX: `realmgate-shutdown:${randomBytes(4).toString('hex')}:`,
        AUTOMATION_UPSTREAM_URL: upstreamUrl,
        SHUTDOWN_GRACE_SECONDS: String(graceSeconds),
        LOG_LEVEL: 'info',
        ...settings,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await untilLogged('realmgate is listening');
    return child;
  }

  /** Resolves once the gateway process has logged `message`. */
  async function untilLogged(message: string): Promise<void> {
    await expect.poll(() => output, EVENTUALLY).toContain(message);
  }

  /** Resolves once the upstream has received exactly `paths`. */
  async function untilArrived(...paths: string[]): Promise<void> {
    await expect.poll(() => arrived, EVENTUALLY).toEqual(paths);
  }

  /**
   * Opens a connection and writes `start` on it; `finish` writes more later. Everything the
   * gateway answers is collected until the connection closes.
   */
  function connection(start: string) {
    const socket = connect(PORT, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.write(start);
    return {
      finish: (rest: string) => socket.write(rest),
      answers: once(socket, 'close').then(() => received),
    };
  }

  const get = (path: string, token: string) =>
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`;

  async function connectionRefused(): Promise<boolean> {
    try {
      await fetch(`http://127.0.0.1:${PORT}/healthz`);
      return false;
    } catch (err) {
      return (err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED';
    }
  }

  it('finishes the request in flight, answers /readyz 503 with Connection: close, refuses new connections, then exits 0', async () => {
    gateway = await startGatewayProcess(LONG_GRACE_SECONDS);
    const token = await accessTokenOf(member);
    const slow = connection(get(`/api/${org}/workspaces/ws1/ita/menu/slow`, token));
    // A probe whose request line has arrived but not the end of its head: in flight, not idle.
    const probe = connection('GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    await untilArrived(`/api/${org}/workspaces/ws1/ita/menu/slow`);

    const exited = once(gateway, 'exit');
    gateway.kill('SIGTERM');
    await untilLogged('shutting down');
    // The listener closes as the shutdown starts: polled, since a connection attempt that
    // raced the close may be reset rather than refused.
    await expect.poll(connectionRefused, EVENTUALLY).toBe(true);
    // A kept-alive request (no `Connection: close` of its own) is told the connection ends
    // with its answer, so a load balancer does not send the next one on it.
    probe.finish('\r\n');
    const probed = await probe.answers;
    expect(probed).toMatch(/^HTTP\/1\.1 503 Service Unavailable[\s\S]*Not ready: shutting down\./);
    expect(probed).toMatch(/\r\nconnection: close\r\n/i);
    // The slow request, forwarded before the signal and answered only now, completes.
    answerSlow();
    expect(await slow.answers).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*"data":"slow"/);
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    expect(output).toContain('shutting down');
    expect(output).toContain('"msg":"stopped"');
  });

  it('closes what is still in flight when the grace period ends', async () => {
    gateway = await startGatewayProcess(5);
    const token = await accessTokenOf(member);
    const forever = connection(get(`/api/${org}/workspaces/ws1/ita/forever`, token));
    await untilArrived(`/api/${org}/workspaces/ws1/ita/forever`);
    const exited = once(gateway, 'exit');
    const started = Date.now();
    gateway.kill('SIGTERM');
    // The upstream never answers: only the end of the grace period closes the connection and
    // lets the process exit (a process that never did would fail the test by its timeout).
    await forever.answers;
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    // Not before the 5 s of grace (a bound from below, which a slow machine cannot break).
    expect(Date.now() - started).toBeGreaterThanOrEqual(4500);
  });

  it('writes every audit record of the requests it answered before it exits, under load', async () => {
    // Records wait in each worker's spool (a minute between writes, batches of 2,000): only the
    // shutdown writes them.
    gateway = await startGatewayProcess(LONG_GRACE_SECONDS, {
      AUDIT_LOG_ENABLED: 'true',
      AUDIT_FLUSH_INTERVAL_MS: '60000',
      AUDIT_BATCH_MAX_RECORDS: '2000',
    });
    const token = await accessTokenOf(member);
    const answered: string[] = [];
    // Eight clients calling one after the other until the gateway refuses their connection.
    const client = async () => {
      for (;;) {
        const res = await fetch(`http://127.0.0.1:${PORT}/api/${org}/workspaces/ws1/ita/quick`, {
          headers: { authorization: `Bearer ${token}` },
        }).catch(() => undefined);
        if (!res) return;
        await res.arrayBuffer();
        answered.push(res.headers.get('x-request-id')!);
      }
    };
    const clients = Array.from({ length: 8 }, client);
    await expect.poll(() => answered.length, EVENTUALLY).toBeGreaterThanOrEqual(300);
    const written = (ids: string[]) =>
      testDb()('audit_log').where({ org }).whereIn('request_id', ids).pluck<string[]>('request_id');
    expect(await written(answered)).toEqual([]);

    const exited = once(gateway, 'exit');
    gateway.kill('SIGTERM');
    await Promise.all(clients);
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    expect((await written(answered)).sort()).toEqual([...answered].sort());
    expect(output).not.toContain('audit records lost');
  });

  it('exits at once on a second signal', async () => {
    gateway = await startGatewayProcess(LONG_GRACE_SECONDS);
    const token = await accessTokenOf(member);
    connection(get(`/api/${org}/workspaces/ws1/ita/forever`, token));
    await untilArrived(`/api/${org}/workspaces/ws1/ita/forever`);
    const exited = once(gateway, 'exit');
    gateway.kill('SIGTERM');
    await untilLogged('shutting down');
    gateway.kill('SIGINT');
    // Exit code 1 is the second signal's: the end of the grace period would exit 0.
    const [code] = (await exited) as [number | null];
    expect(code).toBe(1);
    expect(output).toContain('second signal');
  });
});
