import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DockerComposeEnvironment, Wait } from 'testcontainers';

/*
 * The real docker-compose.yml, driven by testcontainers (DockerComposeEnvironment): built and
 * started as `docker compose up --build` does, under a project name of the suite's own, and
 * always taken down with its volumes (`down -v`), even when a phase fails. The image names come
 * from the environment (CI exports ops/images/local-images.env); unset, the upstream images.
 * Both stacks publish ports 8000 and 8001 of this machine, as the README's command does.
 */

const run = promisify(execFile);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// The swarm suite's load balancer is on a host of its own (vitest.config.ts sets these).
export const PUBLIC_URL = process.env.STACK_PUBLIC_URL ?? 'http://localhost:8000';
export const ADMIN_URL = process.env.STACK_ADMIN_URL ?? 'http://localhost:8001';
/** The host as the containers see it on the stack's network (docker-compose.yml's subnet). */
export const HOST_ON_STACK_NETWORK = '172.30.0.1';

export interface ComposeStack {
  project: string;
  /**
   * The variables its commands interpolate the compose file with, read at each command: a phase
   * may change one (REALMGATE_IMAGE, to move replicas to another image).
   */
  environment: Record<string, string>;
  /** `docker compose <args>` on this stack (its project, file, profiles and environment). */
  compose(...args: string[]): Promise<string>;
  /** A service's log so far (stdout and stderr, without compose's prefixes). */
  logs(service: string): Promise<string>;
  /** The id of a service's container. */
  containerId(service: string): Promise<string>;
  /** Seconds `up` took until every wait strategy was met. */
  upSeconds: number;
  /** Starts the stack again as `up` does, after `down` (the volumes stay). */
  upAgain(): Promise<number>;
  /**
   * `up` of more services (with what they depend on) on a stack started with some of them, each
   * awaited as at the start; the seconds it took.
   */
  upMore(services: string[]): Promise<number>;
  /** `down -v`: containers, network and volumes; safe to call twice. */
  down(): Promise<void>;
}

export interface StackOptions {
  profile?: string;
  /** The services `up` names (with what they depend on); all of the profile when absent. */
  services?: string[];
  /** Extra variables for the compose file's interpolation. */
  environment?: Record<string, string>;
  /** A log line (by service) that means it is ready, beyond its health check. */
  readyLog?: Record<string, RegExp>;
  /** `up --build` the first time (the default); false to run images that exist already. */
  build?: boolean;
}

/** Builds and starts the stack; waits for each service's health check or `readyLog` line. */
export async function startComposeStack(options: StackOptions = {}): Promise<ComposeStack> {
  const project = `realmgate-test-${randomBytes(3).toString('hex')}`;
  const profiles = options.profile ? ['--profile', options.profile] : [];
  const compose = async (...args: string[]) =>
    (
      await run('docker', ['compose', '-p', project, ...profiles, ...args], {
        cwd: ROOT,
        env: { ...process.env, ...stack.environment },
        maxBuffer: 256 * 1024 * 1024,
      })
    ).stdout;
  const up = async (build: boolean, services = options.services) => {
    // testcontainers starts the stack (`docker compose up -d`, `--build` the first time) and
    // waits for published ports; readiness is judged below, so that a service that never gets
    // ready can be shown (its state and log) before the stack is taken down.
    let env = new DockerComposeEnvironment(ROOT, 'docker-compose.yml')
      .withProjectName(project)
      .withEnvironment(stack.environment)
      .withPullPolicy({ shouldPull: () => false })
      .withDefaultWaitStrategy(Wait.forListeningPorts())
      .withStartupTimeout(300_000);
    if (build) env = env.withBuild();
    if (options.profile) env = env.withProfiles(options.profile);
    const since = performance.now();
    await env.up(services);
    await ready(stack, options.readyLog ?? {});
    return (performance.now() - since) / 1000;
  };
  let downed = false;
  const stack: ComposeStack = {
    project,
    environment: { ...options.environment },
    compose,
    logs: async (service) => {
      const out = await run(
        'docker',
        ['compose', '-p', project, ...profiles, 'logs', '--no-log-prefix', '--no-color', service],
        {
          cwd: ROOT,
          env: { ...process.env, ...stack.environment },
          maxBuffer: 256 * 1024 * 1024,
        },
      );
      return out.stdout + out.stderr;
    },
    containerId: async (service) => (await compose('ps', '-q', service)).trim(),
    upSeconds: 0,
    upAgain: () => up(false),
    upMore: (services) => up(false, services),
    down: async () => {
      if (downed) return;
      downed = true;
      // `down` refuses a project that testcontainers has half taken down already (its own
      // `down` after a failed start names no profile): then the project's label finds the rest.
      await compose('down', '-v', '--remove-orphans', '--timeout', '20').catch((err: unknown) =>
        console.error(`docker compose down: ${String(err)}`),
      );
      const label = `label=com.docker.compose.project=${project}`;
      const left = (await run('docker', ['ps', '-aq', '--filter', label])).stdout.split(/\s+/);
      const ids = left.filter((id) => id !== '');
      if (ids.length > 0) await run('docker', ['rm', '-f', '-v', ...ids]);
      await run('docker', ['network', 'prune', '-f', '--filter', label]);
      await run('docker', ['volume', 'prune', '-f', '--filter', label]);
    },
  };
  try {
    stack.upSeconds = await up(options.build ?? true);
  } catch (err) {
    await stack.down().catch((e: unknown) => console.error(`down -v failed: ${String(e)}`));
    throw err;
  }
  return stack;
}

/**
 * Waits until every container with a health check is healthy and each `readyLog` line is in its
 * service's log (polled each second, for at most 5 minutes). On failure prints every
 * container's state and the end of the log of each that is not ready.
 */
async function ready(stack: ComposeStack, readyLog: Record<string, RegExp>): Promise<void> {
  const deadline = performance.now() + 300_000;
  let states: ContainerState[] = [];
  let waitingFor: string[] = [];
  while (performance.now() < deadline) {
    states = (await stack.compose('ps', '--format', 'json'))
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as ContainerState);
    waitingFor = states
      .filter((c) => c.Health !== '' && c.Health !== 'healthy')
      .map((c) => c.Service);
    for (const [service, line] of Object.entries(readyLog)) {
      if (!line.test(await stack.logs(service))) waitingFor.push(service);
    }
    if (states.some((c) => c.Health === 'unhealthy' || c.State === 'restarting')) break;
    if (waitingFor.length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const shown = [`stack ${stack.project} not ready; waiting for ${waitingFor.join(', ')}`];
  for (const c of states) shown.push(`  ${c.Service}: ${c.State} ${c.Status}`);
  for (const service of new Set(waitingFor)) {
    const log = (await stack.logs(service).catch(String)).split('\n').slice(-60).join('\n');
    shown.push(`--- ${service} (last lines of its log)`, log);
  }
  console.error(shown.join('\n'));
  throw new Error(`stack ${stack.project} not ready: ${waitingFor.join(', ')}`);
}

/** What `docker compose ps --format json` says of a container (one JSON object a line). */
interface ContainerState {
  Service: string;
  State: string;
  Status: string;
  /** '' when the container has no health check. */
  Health: string;
}
