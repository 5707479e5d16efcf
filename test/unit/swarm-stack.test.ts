import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  healthBudgetSeconds,
  migrationStatementSeconds,
  type ServiceHealthcheck,
} from '../helpers/gateway-health-budget.ts';

/*
 * ops/swarm/stack.yml says what docker-compose.yml's production profile says, but for what Swarm
 * makes differ (named in the stack file's header and in docs/production-topology.md); and
 * ops/swarm/haproxy.cfg is ops/haproxy/haproxy.cfg with the servers as templates over the tasks.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

interface Service {
  image?: string;
  entrypoint?: string[];
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: Record<string, unknown> & ServiceHealthcheck;
  secrets?: Array<string | { source: string; target: string }>;
  configs?: Array<{ source: string; target: string }>;
  stop_grace_period?: string;
  init?: boolean;
}
interface File {
  services: Record<string, Service>;
  secrets?: Record<string, { external?: boolean }>;
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as File;
const stack = parse(read('ops/swarm/stack.yml'), { merge: true }) as File;

describe('ops/swarm/stack.yml', () => {
  it("runs the production profile's images, health checks and secrets", () => {
    const { image: postgres, environment, healthcheck } = compose.services.postgres!;
    expect(stack.services.postgres).toMatchObject({ image: postgres, environment, healthcheck });
    // Redis asks for a password here (the stack network spans the hosts): from its
    // configuration file, a secret, which its health check reads too.
    const redis = stack.services.redis!;
    expect(redis.image).toBe(compose.services.redis!.image);
    expect(redis.environment).toBeUndefined();
    expect(redis.command).toEqual(['redis-server', '/run/redis/redis.conf']);
    expect(redis.secrets).toEqual([{ source: 'redis_config', target: '/run/redis/redis.conf' }]);
    expect(JSON.stringify(redis.healthcheck)).toContain('REDISCLI_AUTH=');
    // The compose file's database configs are Swarm secrets here (a config is shown by `docker
    // config inspect`), of the same names, at the same paths.
    const asSecrets = (service: Service) =>
      (service.configs ?? [])
        .filter((c) => c.source.startsWith('database-'))
        .map(({ source, target }) => ({ source: source.replace('-', '_'), target }));
    expect(stack.services.postgres!.secrets).toEqual(asSecrets(compose.services.postgres!));
    for (const name of ['keycloak-1', 'keycloak-2']) {
      const { image, healthcheck, environment, secrets } = compose.services['keycloak-1']!;
      expect(stack.services[name]).toMatchObject({ image, healthcheck, environment });
      expect(stack.services[name]!.secrets).toEqual([
        ...secrets!,
        ...asSecrets(compose.services['keycloak-1']!),
      ]);
    }
    const { image, init, stop_grace_period, secrets } = compose.services['gateway-1']!;
    expect(stack.services.gateway).toMatchObject({ image, init, stop_grace_period });
    expect(stack.services.gateway!.secrets).toEqual([
      ...secrets!,
      ...asSecrets(compose.services['gateway-1']!),
      { source: 'redis_url', target: '/run/redis/url' },
    ]);
    for (const secret of Object.values(stack.secrets ?? {})) expect(secret.external).toBe(true);
    expect(Object.keys(stack.secrets ?? {})).toEqual([
      'keycloak_admin_password',
      'keycloak_client_secret',
      'realmgate_cache_secret',
      'database_password',
      'database_url',
      'redis_config',
      'redis_url',
    ]);
    expect(stack.services['load-balancer']!.image).toBe(compose.services['load-balancer']!.image);
  });

  // Swarm replaces a task its health check calls unhealthy, and a replica listens only once
  // its migration is done: a shorter bound cut every long migration, at each restart again.
  it("gives the gateway's health check the migration's bound before it counts failures", () => {
    const { healthcheck } = stack.services.gateway!;
    expect(healthBudgetSeconds(healthcheck)).toBeGreaterThanOrEqual(migrationStatementSeconds);
    expect(healthcheck).toEqual(compose.services['gateway-1']!.healthcheck);
  });

  it("gives Keycloak the production profile's options, the realm import on both nodes", () => {
    const node1 = compose.services['keycloak-1']!.command!;
    expect(compose.services['keycloak-2']!.command).toEqual(
      node1.filter((o) => o !== '--import-realm'),
    );
    for (const name of ['keycloak-1', 'keycloak-2'])
      expect(stack.services[name]!.command).toEqual(node1);
  });

  it("keeps the production profile's Keycloak entry point, adding the cluster transport's address", () => {
    const [shell, flag, script, argv0] = compose.services['keycloak-1']!.entrypoint!;
    const swarm = stack.services['keycloak-1']!.entrypoint!;
    expect([swarm[0], swarm[1], swarm[3]]).toEqual([shell, flag, argv0]);
    const added = swarm[2]!.split('\n').filter((line) => !script!.split('\n').includes(line));
    expect(added.join('\n')).toMatch(/KC_CACHE_EMBEDDED_NETWORK_BIND_ADDRESS/);
    expect(added.every((line) => /KC_CACHE_EMBEDDED_NETWORK_BIND_ADDRESS/.test(line))).toBe(true);
  });

  it("gives the gateway the production replicas' environment, the trusted proxy a range", () => {
    const replica = { ...compose.services['gateway-1']!.environment };
    const swarm = { ...stack.services.gateway!.environment };
    expect(swarm.TRUSTED_PROXIES).toMatch(/\/24\}?'?$/);
    delete replica.TRUSTED_PROXIES;
    delete swarm.TRUSTED_PROXIES;
    // Redis's address holds its password here: a file.
    expect(replica.REDIS_URL).toBe('redis://redis:6379');
    expect(swarm.REDIS_URL_FILE).toBe('/run/redis/url');
    delete replica.REDIS_URL;
    delete swarm.REDIS_URL_FILE;
    expect(swarm).toEqual(replica);
  });
});

describe('ops/swarm/haproxy.cfg', () => {
  it("is ops/haproxy/haproxy.cfg with each backend's two servers a template over the tasks", () => {
    const withoutComments = (text: string) =>
      text.split('\n').filter((line) => !line.startsWith('#'));
    const shipped = withoutComments(read('ops/haproxy/haproxy.cfg'));
    const swarm = withoutComments(read('ops/swarm/haproxy.cfg'));
    const expected = shipped
      .map((line) =>
        line
          .replace(
            /^ {2}server gateway-1 "\$\{LB_GATEWAY_1_PUBLIC\}"$/,
            '  server-template gateway- 32 tasks.gateway:8000',
          )
          .replace(
            /^ {2}server gateway-1 "\$\{LB_GATEWAY_1_ADMIN\}"$/,
            '  server-template gateway- 32 tasks.gateway:8001',
          ),
      )
      .filter((line) => !/^ {2}server gateway-2 /.test(line));
    expect(swarm).toEqual(expected);
  });
});
