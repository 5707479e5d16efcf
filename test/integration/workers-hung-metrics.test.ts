import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fromEveryWorker,
  startClusteredGateway,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { closeTestDb } from '../helpers/platform.ts';

const valueOf = (text: string, series: string) =>
  Number(new RegExp(`^${series.replace(/[{}"\\]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);

/**
 * Opens two connections to the admin listener and keeps them. The supervising process hands each
 * connection to a worker that took its last one (round robin): a stopped worker never takes its
 * connection, so one of these two is held by it, and every later one reaches the other worker.
 */
async function parkOnStoppedWorker(adminUrl: string): Promise<Socket[]> {
  const { hostname, port } = new URL(adminUrl);
  const sockets: Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const socket = connect(Number(port), hostname);
    sockets.push(socket);
    await once(socket, 'connect');
  }
  return sockets;
}

/**
 * A gateway of two workers, one of which hangs (SIGSTOP: it answers nothing, over IPC or HTTP).
 * A scrape that reaches the other worker still answers, with that worker's metrics, and says
 * which worker is missing.
 */
describe('/metrics of two workers while one hangs', () => {
  const port = 21320;
  let gateway: ClusteredGateway;
  let stoppedPid: number | undefined;

  beforeAll(async () => {
    gateway = await startClusteredGateway(port, {
      WORKERS: '2',
      // Access-log lines of answered requests (debug) name the worker.
      LOG_LEVEL: 'debug',
    });
  });

  afterAll(async () => {
    if (stoppedPid !== undefined) process.kill(stoppedPid, 'SIGCONT');
    await gateway?.stop();
    await closeTestDb();
  });

  it("answers with the other worker's metrics and marks the hung one down", async () => {
    await fromEveryWorker(() => gateway.send('/healthz'));
    const ready = await gateway.logLine((l) => l.msg === 'worker ready' && l.worker === 2);
    stoppedPid = ready.pid as number;
    process.kill(stoppedPid, 'SIGSTOP');
    const parked = await parkOnStoppedWorker(gateway.adminUrl);
    try {
      const res = await fetch(`${gateway.adminUrl}/metrics`);
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(valueOf(text, 'realmgate_worker_requests_total{worker="1"}')).toBeGreaterThan(0);
      expect(valueOf(text, 'realmgate_worker_up{worker="1"}')).toBe(1);
      expect(valueOf(text, 'realmgate_worker_up{worker="2"}')).toBe(0);

      process.kill(stoppedPid, 'SIGCONT');
      stoppedPid = undefined;
      const again = await gateway.metrics();
      expect(valueOf(again, 'realmgate_worker_up{worker="2"}')).toBe(1);
      expect(valueOf(again, 'realmgate_worker_requests_total{worker="2"}')).toBeGreaterThan(0);
    } finally {
      parked.forEach((socket) => socket.destroy());
    }
  });
});
