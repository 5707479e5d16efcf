import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';

export interface RedisServer {
  readonly url: string;
  /** SIGTERM, then waits for the process to exit: clients see their connections close. */
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: nothing is saved); resolves once it answers PING. */
  start(): Promise<void>;
}

/**
 * A redis-server process of a suite's own on `port`, without persistence, so that stopping it
 * disturbs no other suite and no shared Redis.
 */
export async function startRedisServer(port: number): Promise<RedisServer> {
  let child: ChildProcess | undefined;
  const server: RedisServer = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      if (child) return;
      const args = [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
      ];
      child = spawn('redis-server', args, { stdio: 'ignore' });
      child.once('exit', () => (child = undefined));
      await waitForPing(port);
    },
    async stop() {
      const running = child;
      if (!running || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGTERM');
      await exited;
    },
  };
  await server.start();
  return server;
}

async function waitForPing(port: number): Promise<void> {
  const probe = new Redis({
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // Refused connections are expected until the server listens.
  probe.on('error', () => undefined);
  try {
    for (let i = 0; i < 100; i++) {
      try {
        await probe.connect();
        await probe.ping();
        return;
      } catch {
        probe.disconnect();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    throw new Error(`redis-server on port ${port} did not start`);
  } finally {
    probe.disconnect();
  }
}
