import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { runHaproxy, type Haproxy } from '../ha/haproxy.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { closeServers } from '../helpers/local-server.ts';

/*
 * ops/swarm/haproxy.cfg run by the real HAProxy in front of a swarm of N hosts, each running one
 * gateway task (stack.yml: `mode: global`): a DNS server here answers `tasks.gateway` with N
 * addresses, as Docker's does, and on each address a stand-in for the task listens on the
 * gateway's ports 8000 and 8001. Every task must get requests through both frontends.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SWARM_CONFIG = path.join(root, 'ops/swarm/haproxy.cfg');
/** Every 127.0.0.x address is this machine's: HAProxy's frontends on one, the tasks after it. */
const BALANCER_ADDRESS = '127.0.0.100';
const taskAddress = (i: number) => `127.0.0.${101 + i}`;
/** The requests this test sends, told apart from HAProxy's health checks (`/readyz`). */
const PROBE_PATH = '/through-the-balancer';

interface Task {
  address: string;
  /** Requests for PROBE_PATH, by port (8000 public, 8001 admin). */
  served: Record<number, number>;
  servers: Server[];
}

async function startTask(address: string): Promise<Task> {
  const task: Task = { address, served: {}, servers: [] };
  for (const port of [8000, 8001]) {
    const server = createServer((req, res) => {
      if (req.url === PROBE_PATH) task.served[port] = (task.served[port] ?? 0) + 1;
      res.writeHead(200, { 'content-type': 'text/plain' }).end(address);
    });
    task.servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, address, resolve);
    });
  }
  return task;
}

/**
 * A name server answering A queries for `tasks.gateway` with `addresses`, like Docker's embedded
 * DNS for a `dnsrr` service: every task's address, a response no larger than the query's EDNS0
 * payload size (512 bytes without one), records dropped from the end to fit and the TC flag
 * set if any were (libnetwork's resolver). No AAAA record (the stack network is IPv4); any
 * other name NXDOMAIN.
 */
async function startNameServer(addresses: string[]): Promise<{ port: number; socket: Socket }> {
  const socket = createSocket('udp4');
  socket.on('message', (query: Buffer, from: RemoteInfo) => {
    const labels: string[] = [];
    let offset = 12;
    while (query[offset]! > 0) {
      labels.push(query.subarray(offset + 1, offset + 1 + query[offset]!).toString('ascii'));
      offset += 1 + query[offset]!;
    }
    const qtype = query.readUInt16BE(offset + 1);
    const questionEnd = offset + 5;
    // EDNS0: the OPT record (type 41, root name) in the additional section; its class is the
    // payload size the asker accepts.
    let maxSize = 512;
    if (query.readUInt16BE(10) > 0 && query.readUInt16BE(questionEnd + 1) === 41) {
      maxSize = Math.max(512, query.readUInt16BE(questionEnd + 3));
    }
    const known = labels.join('.').toLowerCase() === 'tasks.gateway';
    let answers = known && qtype === 1 ? addresses : [];
    let truncated = false;
    while (questionEnd + 16 * answers.length > maxSize) {
      answers = answers.slice(0, -1);
      truncated = true;
    }
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    // QR, AA, TC when truncated, RD as asked, RA; NXDOMAIN for a name not known.
    header.writeUInt16BE(
      0x8480 | (truncated ? 0x0200 : 0) | (query.readUInt16BE(2) & 0x0100) | (known ? 0 : 3),
      2,
    );
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    const records = answers.map((address) => {
      const record = Buffer.alloc(16);
      record.writeUInt16BE(0xc00c, 0); // the question's name
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(600, 6); // Docker's TTL
      record.writeUInt16BE(4, 10);
      address.split('.').forEach((byte, i) => record.writeUInt8(Number(byte), 12 + i));
      return record;
    });
    socket.send(
      Buffer.concat([header, query.subarray(12, questionEnd), ...records]),
      from.port,
      from.address,
    );
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { port: socket.address().port, socket };
}

async function freePort(address: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** ops/swarm/haproxy.cfg in front of `count` gateway tasks; resolves with the tasks. */
async function swarmOf(count: number): Promise<{ haproxy: Haproxy; tasks: Task[] }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'realmgate-swarm-haproxy-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const tasks: Task[] = [];
  cleanups.push(() => closeServers(...tasks.flatMap((task) => task.servers)));
  for (let i = 0; i < count; i++) tasks.push(await startTask(taskAddress(i)));
  const dns = await startNameServer(tasks.map((task) => task.address));
  cleanups.push(() => new Promise<void>((resolve) => dns.socket.close(() => resolve())));
  // The shipped file but for one line: its resolvers read /etc/resolv.conf
  // (`parse-resolv-conf`), Docker's DNS in the stack's container, which this machine's is not.
  // They ask the name server above instead; nothing else is changed.
  const shipped = await readFile(SWARM_CONFIG, 'utf8');
  const lines = shipped.split('\n');
  expect(lines.filter((line) => line === '  parse-resolv-conf')).toHaveLength(1);
  const config = path.join(dir, 'haproxy.cfg');
  await writeFile(
    config,
    lines
      .map((line) =>
        line === '  parse-resolv-conf' ? `  nameserver t 127.0.0.1:${dns.port}` : line,
      )
      .join('\n'),
  );
  // stack.yml's environment for HAProxy, but for the listeners: its ports are the tasks' here.
  // At start HAProxy asks libc for each server's name (`init-addr last,libc,...`): in the
  // stack's container Docker's DNS answers at once, here this machine's, which knows no
  // `tasks.gateway` and may drop a query, costing libc's 5 s timeout a server. One try of 1 s.
  const stack = parse(await readFile(path.join(root, 'ops/swarm/stack.yml'), 'utf8')) as {
    services: Record<string, { environment: Record<string, string> }>;
  };
  const publicBind = `${BALANCER_ADDRESS}:${await freePort(BALANCER_ADDRESS)}`;
  const adminBind = `${BALANCER_ADDRESS}:${await freePort(BALANCER_ADDRESS)}`;
  const haproxy = await runHaproxy(
    config,
    {
      ...stack.services['load-balancer']!.environment,
      LB_PUBLIC_BIND: publicBind,
      LB_ADMIN_BIND: adminBind,
      RES_OPTIONS: 'timeout:1 attempts:1',
    },
    { publicBind, adminBind, logFile: path.join(dir, 'haproxy.log') },
  );
  cleanups.push(() => haproxy.stop());
  return { haproxy, tasks };
}

/** Sends requests through both frontends until every task has served some on both ports. */
async function expectEveryTaskServed(haproxy: Haproxy, tasks: Task[]) {
  const probe = (base: string) =>
    fetch(`${base}${PROBE_PATH}`).then(async (res) => {
      await res.arrayBuffer();
      expect(res.status).toBe(200);
    });
  await vi.waitFor(async () => {
    for (const base of [haproxy.url, haproxy.adminUrl]) {
      await Promise.all(Array.from({ length: tasks.length }, () => probe(base)));
    }
    const unserved = tasks
      .filter((task) => !task.served[8000] || !task.served[8001])
      .map((task) => task.address);
    expect(unserved, 'tasks that got no request through HAProxy').toEqual([]);
  }, EVENTUALLY);
}

const slots = (text: string) =>
  [...text.matchAll(/^ {2}server-template gateway- (\d+) tasks\.gateway:\d+$/gm)].map((m) =>
    Number(m[1]),
  );

describe('ops/swarm/haproxy.cfg in front of the gateway on every host', () => {
  it('sends requests to every task of a swarm of five hosts', async () => {
    const { haproxy, tasks } = await swarmOf(5);
    await expectEveryTaskServed(haproxy, tasks);
  }, 90_000);

  // The limit the file's header and docs/production-topology.md give: Docker's DNS answers
  // that many addresses within the payload size HAProxy announces.
  it('sends requests to every task of a swarm as large as its templates have servers', async () => {
    const counts = slots(await readFile(SWARM_CONFIG, 'utf8'));
    expect(counts).toHaveLength(2);
    expect(new Set(counts).size).toBe(1);
    const { haproxy, tasks } = await swarmOf(counts[0]!);
    await expectEveryTaskServed(haproxy, tasks);
  }, 90_000);
});
