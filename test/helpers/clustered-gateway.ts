import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { startKeycloakRelay, type KeycloakRelay } from './tcp-front.ts';
import { testEnv } from './test-env.ts';

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
  /** The worker that answered, from its access-log line (found by the answer's request id). */
  worker: string;
  /** The gateway's own clock when that line was written (epoch ms): its time, as it reads it. */
  loggedAt: number;
}

export interface ClusteredGateway {
  url: string;
  adminUrl: string;
  /** Sends one request on a connection of its own, so that each may reach another worker. */
  send(path: string, headers?: Record<string, string>, method?: string): Promise<Answer>;
  /** The aggregated Prometheus text of the admin listener. */
  metrics(): Promise<string>;
  /** Resolves with the first log line (parsed) that `matches`, now or later. */
  logLine(matches: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/**
 * `node src/main.ts` with WORKERS workers in front of the test Keycloak and database, as
 * operators run it; resolves once it says it is listening (every worker is then).
 */
export async function startClusteredGateway(
  port: number,
  overrides: Record<string, string>,
): Promise<ClusteredGateway> {
  const env = testEnv();
  const child: ChildProcess = spawn(process.execPath, ['src/main.ts'], {
    env: {
      PATH: process.env.PATH,
      HOST: '127.0.0.1',
      PORT: String(port),
      ADMIN_PORT: String(port + 1),
      PUBLIC_URL: env.publicUrl,
      KEYCLOAK_URL: env.keycloakUrl,
      KEYCLOAK_ADMIN_PASSWORD: env.keycloakAdminPassword,
      KEYCLOAK_CLIENT_SECRET: env.gatewayClientSecret,
      DATABASE_URL: env.databaseUrl,
      TOKEN_CLOCK_LEEWAY_SECONDS: '1',
      // The test realms announce ended sessions to the test gateway, not to this one.
      BACKCHANNEL_LOGOUT_URL: `${env.adminUrl}/backchannel-logout`,
      LOG_LEVEL: 'info',
      ...overrides,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let pending = '';
  const read = (chunk: Buffer) => {
    pending += chunk.toString();
    const complete = pending.split('\n');
    pending = complete.pop()!;
    for (const text of complete) {
      try {
        lines.push(JSON.parse(text) as Record<string, unknown>);
      } catch {
        lines.push({ msg: text });
      }
    }
    waiters.forEach((wake) => wake());
  };
  child.stdout!.on('data', read);
  child.stderr!.on('data', read);

  const logLine: ClusteredGateway['logLine'] = (matches) =>
    new Promise((resolve, reject) => {
      const look = () => {
        const found = lines.find(matches);
        if (found) {
          waiters.delete(look);
          clearTimeout(timer);
          resolve(found);
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(look);
        reject(
          new Error(
            `no such log line; the gateway said:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`,
          ),
        );
      }, 60_000);
      waiters.add(look);
      look();
    });

  const url = `http://127.0.0.1:${port}`;
  const adminUrl = `http://127.0.0.1:${port + 1}`;
  const send: ClusteredGateway['send'] = async (path, headers = {}, method = 'GET') => {
    const target = new URL(path, url);
    const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) =>
      request(target, { method, headers, agent: false }, resolve).on('error', reject).end(),
    );
    let body = '';
    for await (const chunk of res) body += String(chunk);
    const id = res.headers['x-request-id'];
    const line = await logLine((l) => l.reqId === id && typeof l.worker === 'string');
    return {
      status: res.statusCode!,
      body,
      headers: res.headers,
      worker: line.worker as string,
      loggedAt: line.time as number,
    };
  };
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  };
  try {
    await Promise.race([
      logLine((l) => l.msg === 'realmgate is listening'),
      once(child, 'exit').then(() => {
        throw new Error(`gateway exited: ${lines.map((l) => JSON.stringify(l)).join('\n')}`);
      }),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    adminUrl,
    send,
    logLine,
    metrics: () => fetch(`${adminUrl}/metrics`).then((res) => res.text()),
    stop,
  };
}

/**
 * A gateway of two workers on `port` and `port + 1` whose Keycloak is the test one behind a
 * relay on `port + 5` that the test can cut; it logs at debug, so that each answer names its
 * worker. `overrides` adds settings or replaces these.
 */
export async function startTwoWorkers(
  port: number,
  overrides: Record<string, string> = {},
): Promise<{ gateway: ClusteredGateway; keycloak: KeycloakRelay }> {
  const keycloak = await startKeycloakRelay(port + 5);
  try {
    const gateway = await startClusteredGateway(port, {
      KEYCLOAK_URL: keycloak.keycloakUrl,
      WORKERS: '2',
      // Access-log lines of answered requests (debug) name the worker.
      LOG_LEVEL: 'debug',
      ...overrides,
    });
    return { gateway, keycloak };
  } catch (err) {
    await keycloak.cut();
    throw err;
  }
}

/**
 * Sends `request` (each on a connection of its own) until two workers have answered; returns
 * every answer.
 */
export async function fromEveryWorker(request: () => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  while (new Set(answers.map((a) => a.worker)).size < 2) {
    if (answers.length >= 20) throw new Error('20 requests reached one worker only');
    answers.push(await request());
  }
  return answers;
}
