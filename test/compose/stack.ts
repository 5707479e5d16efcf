import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  DockerComposeEnvironment,
  Wait,
  type StartedDockerComposeEnvironment,
  type WaitStrategy,
} from 'testcontainers';

/*
 * The real docker-compose.yml, driven by testcontainers (DockerComposeEnvironment): built and
 * started as `docker compose up --build` does, under a project name of the suite's own, and
 * always taken down with its volumes (`down -v`), even when a phase fails. The image names come
 * from the environment (CI exports ops/images/local-images.env); unset, the upstream images.
 * Both stacks publish ports 8000 and 8001 of this machine, as the README's command does.
 */

const run = promisify(execFile);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PUBLIC_URL = 'http://localhost:8000';
export const ADMIN_URL = 'http://localhost:8001';
/** The host as the containers see it on the stack's network (docker-compose.yml's subnet). */
export const HOST_ON_STACK_NETWORK = '172.30.0.1';

export interface ComposeStack {
  project: string;
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
  /** `down -v`: containers, network and volumes; safe to call twice. */
  down(): Promise<void>;
}

export interface StackOptions {
  profile?: string;
  /** The services `up` names (with what they depend on); all of the profile when absent. */
  services?: string[];
  /** Extra variables for the compose file's interpolation. */
  environment?: Record<string, string>;
  /** How to know a service is ready, where not by its health check (by service name). */
  readyWhen?: Record<string, WaitStrategy>;
}

/** Builds and starts the stack; waits for each service's health check or `readyLog` line. */
export async function startComposeStack(options: StackOptions = {}): Promise<ComposeStack> {
  const project = `realmgate-test-${randomBytes(3).toString('hex')}`;
  const environment = options.environment ?? {};
  const profiles = options.profile ? ['--profile', options.profile] : [];
  const compose = async (...args: string[]) =>
    (
      await run('docker', ['compose', '-p', project, ...profiles, ...args], {
        cwd: ROOT,
        env: { ...process.env, ...environment },
        maxBuffer: 256 * 1024 * 1024,
      })
    ).stdout;
  const up = async (build: boolean) => {
    let env = new DockerComposeEnvironment(ROOT, 'docker-compose.yml')
      .withProjectName(project)
      .withEnvironment(environment)
      .withPullPolicy({ shouldPull: () => false })
      // Every service with a health check is waited for until healthy; the first start of
      // Keycloak (its build and realm import) takes a minute or more on a busy machine.
      .withDefaultWaitStrategy(Wait.forHealthCheck())
      .withStartupTimeout(300_000);
    if (build) env = env.withBuild();
    if (options.profile) env = env.withProfiles(options.profile);
    for (const [service, strategy] of Object.entries(options.readyWhen ?? {})) {
      env = env.withWaitStrategy(`${service}-1`, strategy);
    }
    const since = performance.now();
    const started: StartedDockerComposeEnvironment = await env.up(options.services);
    return { started, seconds: (performance.now() - since) / 1000 };
  };
  let downed = false;
  const stack: ComposeStack = {
    project,
    compose,
    logs: async (service) => {
      const out = await run(
        'docker',
        ['compose', '-p', project, ...profiles, 'logs', '--no-log-prefix', '--no-color', service],
        {
          cwd: ROOT,
          env: { ...process.env, ...environment },
          maxBuffer: 256 * 1024 * 1024,
        },
      );
      return out.stdout + out.stderr;
    },
    containerId: async (service) => (await compose('ps', '-q', service)).trim(),
    upSeconds: 0,
    upAgain: async () => (await up(false)).seconds,
    down: async () => {
      if (downed) return;
      downed = true;
      await compose('down', '-v', '--remove-orphans', '--timeout', '20');
    },
  };
  try {
    stack.upSeconds = (await up(true)).seconds;
  } catch (err) {
    await stack.down().catch(() => undefined);
    throw err;
  }
  return stack;
}
