import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, vi } from 'vitest';
import { ROOT } from '../compose/stack.ts';
import type { StackSecrets } from '../compose/production-load.ts';
import { childStdin } from '../helpers/child-stdin.ts';

/** The production profile's secrets, and the stack's Redis password (the profile has none). */
export interface SwarmSecrets extends StackSecrets {
  REDIS_PASSWORD: string;
}

/*
 * The swarm suite's three hosts (test/swarm/hosts.sh) and the stack on them (ops/swarm/stack.yml):
 * Docker commands on a host, the images from the archive .ci/swarm-suite saves pushed to the
 * hosts' registry, the deploy, and where each service's tasks run.
 */

const run = promisify(execFile);
const HOSTS_SCRIPT = path.join(ROOT, 'test/swarm/hosts.sh');
export const HOSTS = [1, 2, 3] as const;
export type Host = (typeof HOSTS)[number];
const NET = process.env.SWARM_NET ?? '10.231.44';
/** This machine on the hosts' bridge: the registry, and the recording upstream. */
export const MACHINE = `${NET}.1`;
const REGISTRY = `${MACHINE}:5000`;
export const addressOf = (host: Host) => `${NET}.1${host}`;
/** The replica on `host`, straight (the suite's port, test/swarm/direct-ports.yml). */
export const replicaUrl = (host: Host) => `http://${addressOf(host)}:8100`;
export const STACK = 'realmgate';
const service = (name: string) => `${STACK}_${name}`;

/** `docker <args>` against `host`'s daemon; its output. */
export async function docker(host: Host, ...args: string[]): Promise<string> {
  const socket = `unix:///run/realmgate-swarm/host${host}/docker.sock`;
  const { stdout } = await run('docker', ['-H', socket, ...args], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout.trim();
}

/** test/swarm/hosts.sh `command` (up, down, cut N, mend N), its output shown. */
export function hosts(...args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(HOSTS_SCRIPT, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`hosts.sh ${args.join(' ')}: exit ${code}`)),
    );
  });
}

/** The images the stack runs, as the registry on the bridge serves them. */
export interface StackImages {
  gateway: string;
  /** What the rolling update moves the gateway to. */
  nextGateway: string;
  environment: Record<string, string>;
}

/**
 * Loads the archive (SWARM_IMAGES) into host 1 and pushes each image to the registry the hosts
 * pull from.
 */
export async function pushImages(): Promise<StackImages> {
  const archive = process.env.SWARM_IMAGES;
  if (!archive) throw new Error('SWARM_IMAGES: the archive .ci/swarm-suite saves');
  await docker(1, 'load', '-q', '-i', archive);
  const local: Record<string, string> = {
    KEYCLOAK_IMAGE: process.env.KEYCLOAK_IMAGE ?? '',
    POSTGRES_IMAGE: process.env.POSTGRES_IMAGE ?? '',
    REDIS_IMAGE: process.env.REDIS_IMAGE ?? '',
    HAPROXY_IMAGE: process.env.HAPROXY_IMAGE ?? '',
    REALMGATE_IMAGE: 'realmgate:swarm-1',
    NEXT: 'realmgate:swarm-2',
  };
  const environment: Record<string, string> = {};
  for (const [name, image] of Object.entries(local)) {
    if (!image)
      throw new Error(`${name}: ops/images/local-images.env is exported by .ci/swarm-suite`);
    const remote = `${REGISTRY}/${image}`;
    await docker(1, 'tag', image, remote);
    await docker(1, 'push', '-q', remote);
    environment[name] = remote;
  }
  const { NEXT: nextGateway, ...stackImages } = environment;
  return {
    gateway: stackImages.REALMGATE_IMAGE!,
    nextGateway: nextGateway!,
    environment: stackImages,
  };
}

/** The gateways' database address, as the secret database_url holds it (ops/swarm/stack.yml). */
export const databaseUrl = (password: string) =>
  `postgres://realmgate:${password}@postgres:5432/realmgate`;

/** The gateways' Redis address, as the secret redis_url holds it. */
export const redisUrl = (password: string) => `redis://:${password}@redis:6379`;

/** The swarm secrets the stack names, then `docker stack deploy`. */
export async function deploy(
  secrets: SwarmSecrets,
  environment: Record<string, string>,
): Promise<void> {
  const names: Record<string, string> = {
    keycloak_admin_password: secrets.KEYCLOAK_ADMIN_PASSWORD,
    keycloak_client_secret: secrets.KEYCLOAK_CLIENT_SECRET,
    realmgate_cache_secret: secrets.REALMGATE_CACHE_SECRET,
    database_password: secrets.POSTGRES_PASSWORD,
    database_url: databaseUrl(secrets.POSTGRES_PASSWORD),
    redis_config: `requirepass ${secrets.REDIS_PASSWORD}\n`,
    redis_url: redisUrl(secrets.REDIS_PASSWORD),
  };
  for (const [name, value] of Object.entries(names)) {
    await new Promise<void>((resolve, reject) => {
      const child = spawn('docker', [
        ...['-H', 'unix:///run/realmgate-swarm/host1/docker.sock'],
        ...['secret', 'create', name, '-'],
      ]);
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`secret ${name}`))));
      childStdin(child.stdin, reject).end(value);
    });
  }
  await run(
    'docker',
    [
      ...['-H', 'unix:///run/realmgate-swarm/host1/docker.sock', 'stack', 'deploy'],
      ...['-c', 'ops/swarm/stack.yml', '-c', 'test/swarm/direct-ports.yml', STACK],
    ],
    { cwd: ROOT, env: { ...process.env, ...environment } },
  );
}

/** Node id -> host, from the label hosts.sh gives every node. */
let hostOfNode: Map<string, Host> | undefined;
async function nodeHosts(): Promise<Map<string, Host>> {
  if (hostOfNode) return hostOfNode;
  const map = new Map<string, Host>();
  for (const host of HOSTS)
    map.set(await docker(host, 'info', '--format', '{{.Swarm.NodeID}}'), host);
  hostOfNode = map;
  return map;
}
export const nodeIdOf = async (host: Host) =>
  [...(await nodeHosts()).entries()].find(([, h]) => h === host)![0];

/** The hosts where `name`'s tasks are running now (Docker says running), sorted. */
export async function runningOn(name: string, from: Host = 1): Promise<Host[]> {
  const ids = (
    await docker(from, 'service', 'ps', '-q', '--filter', 'desired-state=running', service(name))
  )
    .split('\n')
    .filter(Boolean);
  if (ids.length === 0) return [];
  const lines = (
    await docker(from, 'inspect', '--format', '{{.NodeID}} {{.Status.State}}', ...ids)
  ).split('\n');
  const map = await nodeHosts();
  return lines
    .map((line) => line.split(' '))
    .filter(([, state]) => state === 'running')
    .map(([node]) => map.get(node!)!)
    .sort();
}

/** Waits until `name` runs on exactly `where`; the seconds since `since`. */
export async function placed(
  name: string,
  where: Host[],
  since = performance.now(),
  from: Host = 1,
): Promise<number> {
  await vi.waitFor(async () => expect(await runningOn(name, from)).toEqual(where), {
    timeout: 400_000,
    interval: 1000,
  });
  return (performance.now() - since) / 1000;
}

/** Waits until `url`/readyz answers 200 (a replica, or the load balancer); the seconds taken. */
export async function ready(url: string, since = performance.now()): Promise<number> {
  await vi.waitFor(
    async () =>
      expect(
        (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) }).catch(() => undefined))
          ?.status,
      ).toBe(200),
    { timeout: 400_000, interval: 500 },
  );
  return (performance.now() - since) / 1000;
}

/** A service's log (every task's), as `docker service logs` gives it. */
export async function serviceLogs(name: string): Promise<string> {
  const socket = 'unix:///run/realmgate-swarm/host1/docker.sock';
  const { stdout, stderr } = await run(
    'docker',
    ['-H', socket, 'service', 'logs', '--raw', '--no-trunc', service(name)],
    { maxBuffer: 256 * 1024 * 1024 },
  );
  return stdout + stderr;
}

/** Labels `host` with `labels` (name=value), as an operator names where a service may run. */
export async function label(host: Host, ...labels: string[]): Promise<void> {
  const args = labels.flatMap((l) => ['--label-add', l]);
  await docker(1, 'node', 'update', ...args, await nodeIdOf(host));
}

/** `docker node update --availability <availability>` of `host`. */
export async function setAvailability(host: Host, availability: 'drain' | 'active'): Promise<void> {
  await docker(1, 'node', 'update', '--availability', availability, await nodeIdOf(host));
}

/** Waits until the swarm (asked on host 1) calls `host` `status` (ready, down). */
export async function nodeStatus(host: Host, status: 'ready' | 'down', since = performance.now()) {
  const id = await nodeIdOf(host);
  await vi.waitFor(
    async () =>
      expect(await docker(1, 'node', 'inspect', '--format', '{{.Status.State}}', id)).toBe(status),
    { timeout: 120_000, interval: 500 },
  );
  return (performance.now() - since) / 1000;
}

/** `docker service update` of the gateway to `image`, as an operator moves to a release. */
export async function updateGateway(image: string): Promise<void> {
  await docker(1, 'service', 'update', '--quiet', '--image', image, service('gateway'));
}

/** The gateway service's image (without the digest Swarm pins) and the state of its last update. */
export async function gatewayUpdate(): Promise<{ image: string; state: string }> {
  const [image, state] = (
    await docker(
      1,
      'service',
      'inspect',
      '--format',
      '{{.Spec.TaskTemplate.ContainerSpec.Image}} {{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}',
      service('gateway'),
    )
  ).split(' ');
  return { image: image!.replace(/@sha256:.*$/, ''), state: state ?? '' };
}

/** The host each request to the upstream came from (replicas reach it from their host's address). */
export function hostOfAddress(address: string): Host | undefined {
  const host = HOSTS.find((h) => address.endsWith(addressOf(h)));
  return host;
}

/** What a failed deploy or phase needs shown: every task's state and error, and each service's log tail. */
export async function showStack(): Promise<void> {
  const tasks = await docker(
    1,
    'stack',
    'ps',
    '--no-trunc',
    '--format',
    '{{.Name}} {{.Node}} {{.DesiredState}} {{.CurrentState}} {{.Error}}',
    STACK,
  ).catch((err: unknown) => String(err));
  console.log(`== swarm tasks\n${tasks}`);
  for (const name of [
    'postgres',
    'redis',
    'keycloak-1',
    'keycloak-2',
    'gateway',
    'load-balancer',
  ]) {
    const log = await serviceLogs(name).catch((err: unknown) => String(err));
    console.log(
      `== ${name} (last lines)\n${log
        .split('\n')
        .slice(name === 'load-balancer' ? -60 : -25)
        .join('\n')}`,
    );
  }
}
