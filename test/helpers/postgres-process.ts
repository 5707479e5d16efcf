import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

export interface PostgresProcess {
  /** `postgres://postgres@127.0.0.1:<port>`, without a database name. */
  readonly url: string;
  /** Fast shutdown (SIGINT): open connections are ended, then the port closes. */
  stop(): Promise<void>;
  /** Starts it again on the same data; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it and removes its data directory. */
  destroy(): Promise<void>;
}

/**
 * A PostgreSQL server of a suite's own on `port` (loopback, TCP only, trust authentication,
 * fsync off), in a fresh data directory under the system's temporary folder: stopping it
 * disturbs no other suite and no shared server. Uses the PostgreSQL binaries of the machine
 * (`initdb` on PATH, else Debian's newest /usr/lib/postgresql/<version>/bin). PostgreSQL refuses
 * to run as root, so when this process is root the server runs as the `postgres` user.
 */
export async function startPostgresProcess(port: number): Promise<PostgresProcess> {
  const bin = postgresBinDir();
  const owner = process.getuid?.() === 0 ? systemUser('postgres') : undefined;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'realmgate-pg-'));
  const logFile = path.join(dataDir, 'server.log');
  if (owner) chownSync(dataDir, owner.uid, owner.gid);
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {};
  try {
    await promisify(execFile)(
      path.join(bin, 'initdb'),
      ['-D', path.join(dataDir, 'data'), '-U', 'postgres', '-A', 'trust', '-E', 'UTF8'],
      { ...asOwner, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' } },
    );
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${(err as { stderr?: string }).stderr ?? String(err)}`, {
      cause: err,
    });
  }
  let child: ChildProcess | undefined;
  const server: PostgresProcess = {
    url: `postgres://postgres@127.0.0.1:${port}`,
    async start() {
      if (child) return;
      const log = openSync(logFile, 'a');
      if (owner) chownSync(logFile, owner.uid, owner.gid);
      const settings = [
        'listen_addresses=127.0.0.1',
        'unix_socket_directories=',
        'fsync=off',
        'shared_buffers=32MB',
      ];
      const running = spawn(
        path.join(bin, 'postgres'),
        [
          '-D',
          path.join(dataDir, 'data'),
          '-p',
          String(port),
          ...settings.flatMap((s) => ['-c', s]),
        ],
        { ...asOwner, stdio: ['ignore', log, log] },
      );
      closeSync(log);
      child = running;
      running.once('exit', () => (child = undefined));
      await waitForConnection(server.url, running, logFile);
    },
    async stop() {
      const running = child;
      if (!running || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGINT');
      await exited;
    },
    async destroy() {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await server.start();
  } catch (err) {
    await server.destroy();
    throw err;
  }
  return server;
}

/** Where `initdb` and `postgres` are. */
function postgresBinDir(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(path.join(dir, 'initdb'))) return dir;
  }
  const debian = '/usr/lib/postgresql';
  const versions = existsSync(debian)
    ? readdirSync(debian).filter((v) => existsSync(path.join(debian, v, 'bin', 'initdb')))
    : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error('no PostgreSQL server binaries (initdb) found');
  return path.join(debian, newest, 'bin');
}

/** The uid and gid of a system account, from /etc/passwd. */
function systemUser(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`running as root, and there is no ${name} user to run PostgreSQL`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Resolves once the server accepts a connection; throws if it exits first or takes 30 s. */
async function waitForConnection(url: string, child: ChildProcess, logFile: string) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`postgres exited with ${child.exitCode}; see ${logFile}`);
    }
    const client = new pg.Client({ connectionString: `${url}/postgres` });
    // Refused connections are expected until the server listens.
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`postgres did not accept connections within 30 s; see ${logFile}`);
}
