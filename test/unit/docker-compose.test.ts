import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KEYCLOAK_BUILD_OPTIONS, KEYCLOAK_VERSION } from '../../keycloak/distribution.ts';
import { configSchema, loadConfig, requiredSecrets } from '../../src/config/config.ts';
import { HAPROXY_CONFIG, haproxyEnvironment } from '../ha/haproxy.ts';

/*
 * docker-compose.yml read with a YAML parser (`yaml`), validated against the Compose
 * Specification's JSON schema (`ajv`), then checked against the rest of the repository.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const composeText = readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');

/** The parts of a compose file these tests read; the schema says what else may be there. */
interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  volumes?: unknown[];
  configs?: unknown[];
  ports?: string[];
  depends_on?: string[] | Record<string, unknown>;
  healthcheck?: { test?: string[] };
}
interface ComposeFile {
  services: Record<string, ComposeService>;
  configs?: Record<string, { file?: string; content?: string }>;
  secrets?: Record<string, { file?: string }>;
}
const compose = parse(composeText) as ComposeFile;

/**
 * schema/compose-spec.json of the Compose Specification (github.com/compose-spec/compose-spec,
 * its commit a08f8d5 of 2025-10-21, the file's latest), copied unchanged: Copyright 2020 The
 * Compose Specification Authors, Apache License 2.0. No npm package ships it current.
 */
const composeSchema = JSON.parse(
  readFileSync(path.join(root, 'test/schemas/compose-spec.json'), 'utf8'),
) as { $schema: string };

/** Variables the compose file may interpolate besides the gateway's own (the postgres image's). */
const extraVariables = ['POSTGRES_USER', 'POSTGRES_PASSWORD'];
const schemaKeys = Object.keys(configSchema.shape);

/** Non-blank lines without comment lines, trimmed: how HAProxy's configuration is read here. */
function lines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

function service(name: string): ComposeService {
  const found = compose.services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
}

/** A service's environment, in the file's order; the list form `KEY=value` read as compose does. */
function environment(name: string): Map<string, string> {
  const env = service(name).environment ?? {};
  if (Array.isArray(env)) {
    return new Map(
      env.map((entry): [string, string] => {
        const at = entry.indexOf('=');
        return at === -1 ? [entry, ''] : [entry.slice(0, at), entry.slice(at + 1)];
      }),
    );
  }
  return new Map(Object.entries(env).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

/** Every string in the file's data (keys and values), where compose interpolates. */
function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => [k, ...strings(v)]);
  }
  return [];
}

/** Every interpolation in the compose file: `${NAME...}` and `$NAME`, but not escaped `$$`. */
function interpolations(of: unknown): Array<{ name: string; modifier: string }> {
  const found: Array<{ name: string; modifier: string }> = [];
  for (const text of strings(of)) {
    for (const m of text.matchAll(
      /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    )) {
      if (m[0] === '$$') continue;
      found.push({ name: m[1] ?? m[3]!, modifier: m[2]?.slice(0, 2) ?? '' });
    }
  }
  return found;
}

/** Resolves interpolations the way compose does when only the required variables are set. */
function resolve(value: string, given: Record<string, string>): string {
  return value.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-?])([^}]*))?\}/g,
    (_, name: string, op?: string, arg?: string) => {
      const v = given[name];
      if (v !== undefined && v !== '') return v;
      if (op === '-') return arg ?? '';
      throw new Error(`${name} is required: ${arg ?? ''}`);
    },
  );
}

const gateways = ['gateway-1', 'gateway-2'];
const keycloakNodes = ['keycloak-1', 'keycloak-2'];
/** Secrets the compose file refuses to start without: the gateway's two, and the shared cache key. */
const composeSecrets = [...requiredSecrets, 'REALMGATE_CACHE_SECRET'];

function command(name: string): string[] {
  return service(name).command ?? [];
}

/** The services `name` waits for, in the file's order (list or map form). */
function dependsOn(name: string): string[] {
  const dependencies = service(name).depends_on ?? [];
  return Array.isArray(dependencies) ? dependencies : Object.keys(dependencies);
}

/** The file of a config kept in a file of its own (`configs: name: file: ./path`). */
function configFile(name: string): string {
  const config = compose.configs?.[name];
  expect(Object.keys(config ?? {})).toEqual(['file']);
  return config!.file!;
}

/** `"${NAME}"` and `"$NAME"` in an HAProxy configuration: what HAProxy expands when it reads it. */
function haproxyVariables(text: string): string[] {
  return [...text.matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g)].map((m) => m[1]!);
}

/**
 * The HAProxy configuration as the load balancer reads it: its lines (without comments),
 * every variable replaced by the load-balancer service's environment.
 */
function haproxyConfig(): string[] {
  const env = environment('load-balancer');
  const text = readFileSync(path.join(root, configFile('haproxy')), 'utf8').replace(
    /"\$\{([A-Za-z_][A-Za-z0-9_]*)\}"/g,
    (_, name: string) => {
      const value = env.get(name);
      if (value === undefined) throw new Error(`the load balancer does not set ${name}`);
      return value;
    },
  );
  return lines(text);
}

describe('docker-compose.yml', () => {
  it('is a valid compose file: the Compose Specification schema accepts it', () => {
    // The strictTypes warnings would be about the specification's schema, not about this file.
    const ajv = new Ajv({ allErrors: true, strictTypes: false });
    // The specification names JSON Schema draft-07 by its https address: the same meta-schema.
    const draft07 = ajv.getSchema('http://json-schema.org/draft-07/schema')?.schema as object;
    ajv.addMetaSchema({ ...draft07, $id: composeSchema.$schema });
    const validate = ajv.compile(composeSchema);
    expect(validate(compose), JSON.stringify(validate.errors, null, 2)).toBe(true);
    // ... and refuses what compose would refuse, e.g. a misspelt service key.
    const misspelt = structuredClone(compose);
    (misspelt.services.redis as Record<string, unknown>).restrat = 'always';
    expect(validate(misspelt)).toBe(false);
  });

  it('declares the production topology: two Keycloak nodes, two gateways, a load balancer', () => {
    expect(Object.keys(compose.services)).toEqual([
      'postgres',
      'redis',
      ...keycloakNodes,
      ...gateways,
      'load-balancer',
    ]);
  });

  it('mounts only files that exist in the repository', () => {
    const mounts = Object.values(compose.services).flatMap((s) => s.volumes ?? []);
    const binds = mounts
      .map((m) =>
        typeof m === 'string' ? /^(\.\.?\/[^:]*):([^:]+)(?::([a-z,]+))?$/.exec(m) : null,
      )
      .filter((m) => m !== null)
      .map((m) => ({ source: m[1]!, target: m[2]!, mode: m[3] }));
    expect(binds).toEqual([
      {
        source: './realm-export/master.json',
        target: '/opt/keycloak/data/import/master.json',
        mode: 'ro',
      },
    ]);
    expect(binds.filter((b) => !existsSync(path.join(root, b.source)))).toEqual([]);
    // The long syntax (`source: ./x`) is not used; if it ever is, this test must learn it.
    expect(mounts.filter((m) => typeof m !== 'string')).toEqual([]);
    // Configs (and secrets) kept in files of their own: HAProxy's only.
    const files = [...Object.values(compose.configs ?? {}), ...Object.values(compose.secrets ?? {})]
      .map((c) => c.file)
      .filter((file) => file !== undefined);
    expect(files).toEqual(['./ops/haproxy/haproxy.cfg']);
    expect(existsSync(path.join(root, configFile('haproxy')))).toBe(true);
  });

  it('builds both gateways from the repository root, where the Dockerfile is', () => {
    for (const gateway of gateways) {
      expect(service(gateway).build, gateway).toEqual({ context: '.' });
    }
    expect(statSync(path.join(root, '.')).isDirectory()).toBe(true);
    expect(existsSync(path.join(root, 'Dockerfile'))).toBe(true);
    // No other service is built.
    const built = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);
    expect(built.map(([name]) => name)).toEqual(gateways);
  });

  it('interpolates only configuration variables and the postgres credentials', () => {
    const names = [...new Set(interpolations(compose).map((i) => i.name))].sort();
    expect(names.filter((n) => !schemaKeys.includes(n) && !extraVariables.includes(n))).toEqual([]);
    expect(names).toEqual([
      'ADMIN_PUBLIC_URL',
      'KEYCLOAK_ADMIN_PASSWORD',
      'KEYCLOAK_ADMIN_USERNAME',
      'KEYCLOAK_CLIENT_SECRET',
      'LOG_LEVEL',
      'POSTGRES_PASSWORD',
      'POSTGRES_USER',
      'PUBLIC_URL',
      'REALMGATE_CACHE_SECRET',
    ]);
  });

  it('requires the secrets (`${NAME:?message}`) wherever they are used', () => {
    const uses = (name: string) => interpolations(compose).filter((i) => i.name === name);
    // Keycloak node 1 (which creates the administrator and imports the realm) and each gateway.
    for (const secret of requiredSecrets) {
      expect(
        uses(secret).map((u) => u.modifier),
        secret,
      ).toEqual([':?', ':?', ':?']);
    }
    expect(uses('REALMGATE_CACHE_SECRET').map((u) => u.modifier)).toEqual([':?', ':?']);
    // Nothing else is required and nothing is used without a default.
    const others = interpolations(compose).filter((i) => !composeSecrets.includes(i.name));
    expect(others.filter((i) => i.modifier !== ':-')).toEqual([]);
  });

  it('gives both gateways the same valid configuration, of configuration variables only', () => {
    const env = environment('gateway-1');
    expect([...environment('gateway-2')]).toEqual([...env]);
    expect([...env.keys()].filter((k) => !schemaKeys.includes(k))).toEqual([]);
    expect([...env.keys()].sort()).toEqual([
      'ADMIN_HOST',
      'ADMIN_PUBLIC_URL',
      'DATABASE_URL',
      'HOST',
      'KEYCLOAK_ADMIN_PASSWORD',
      'KEYCLOAK_ADMIN_USERNAME',
      'KEYCLOAK_CLIENT_SECRET',
      'KEYCLOAK_URL',
      'LOG_LEVEL',
      'PUBLIC_URL',
      'REALMGATE_CACHE_SECRET',
      'REDIS_URL',
      'TRUSTED_PROXIES',
    ]);
    const given = {
      KEYCLOAK_ADMIN_PASSWORD: 'admin-password-0123456789',
      KEYCLOAK_CLIENT_SECRET: 'client-secret-0123456789',
      REALMGATE_CACHE_SECRET: 'cache-secret-0123456789',
    };
    const resolved = Object.fromEntries([...env].map(([k, v]) => [k, resolve(v, given)]));
    const config = loadConfig(resolved);
    expect(config).toMatchObject({
      HOST: '0.0.0.0',
      PORT: 8000,
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: 8001,
      PUBLIC_URL: 'http://localhost:8000',
      ADMIN_PUBLIC_URL: 'http://localhost:8001',
      // Every Keycloak node, at the port and path it serves.
      KEYCLOAK_URL: keycloakNodes.map((node) => `http://${node}:8080/auth`),
      KEYCLOAK_ADMIN_USERNAME: 'admin',
      KEYCLOAK_ADMIN_PASSWORD: 'admin-password-0123456789',
      KEYCLOAK_CLIENT_SECRET: 'client-secret-0123456789',
      REALMGATE_CACHE_SECRET: 'cache-secret-0123456789',
      DATABASE_URL: 'postgres://realmgate:realmgate-local-only@postgres:5432/realmgate',
      REDIS_URL: 'redis://redis:6379',
      REALMGATE_DEMO: false,
    });
    expect(() => resolve(env.get('KEYCLOAK_CLIENT_SECRET')!, {})).toThrow(
      'KEYCLOAK_CLIENT_SECRET is required',
    );
  });

  it('publishes the load balancer only: the public listener, and the admin one on loopback', () => {
    expect(service('load-balancer').ports).toEqual(['8000:8000', '127.0.0.1:8001:8001']);
    for (const name of [...gateways, ...keycloakNodes]) {
      expect(service(name).ports, name).toBeUndefined();
    }
  });

  it('balances over both gateways, each checked by its /readyz, on both listeners', () => {
    const haproxy = haproxyConfig();
    const servers = haproxy.filter((l) => l.startsWith('server '));
    expect(servers).toEqual([
      ...gateways.map((g) => `server ${g} ${g}:8000`),
      ...gateways.map((g) => `server ${g} ${g}:8001`),
    ]);
    expect(haproxy.filter((l) => l === 'option httpchk GET /readyz')).toHaveLength(2);
    expect(haproxy.filter((l) => l.startsWith('default-server check'))).toHaveLength(2);
    expect(haproxy.filter((l) => l.startsWith('bind '))).toEqual(['bind :8000', 'bind :8001']);
    expect(haproxy.filter((l) => l === 'option forwardfor')).toHaveLength(2);
    expect(dependsOn('load-balancer')).toEqual(gateways);
  });

  it('runs the HAProxy configuration the HA suite runs, told where things are by the environment', () => {
    // One file: the one the HA suite (test/ha/haproxy.ts) starts HAProxy with.
    expect(path.join(root, configFile('haproxy'))).toBe(HAPROXY_CONFIG);
    const text = readFileSync(HAPROXY_CONFIG, 'utf8');
    // Every variable is quoted (HAProxy expands them only inside double quotes) ...
    expect(haproxyVariables(text.replace(/"\$\{[A-Za-z0-9_]+\}"/g, ''))).toEqual([]);
    // ... and the load balancer sets exactly those the file reads, as the HA suite does.
    const used = [...new Set(haproxyVariables(text))].sort();
    expect([...environment('load-balancer').keys()].sort()).toEqual(used);
    const suite = haproxyEnvironment({
      publicBind: '127.0.0.1:1',
      adminBind: '127.0.0.1:2',
      sourceAddress: '127.0.0.10',
      gateways: [
        { public: '127.0.0.1:3', admin: '127.0.0.1:4' },
        { public: '127.0.0.1:5', admin: '127.0.0.1:6' },
      ],
    });
    expect(Object.keys(suite).sort()).toEqual(used);
  });

  it('runs the Keycloak version and options of the local launcher, as one cluster', () => {
    for (const node of keycloakNodes) {
      expect(service(node).image, node).toBe(`quay.io/keycloak/keycloak:${KEYCLOAK_VERSION}`);
      const options = command(node);
      expect(options[0]).toBe('start');
      // Every build option except the database, which is PostgreSQL here.
      const buildOptions = KEYCLOAK_BUILD_OPTIONS.filter((o) => !o.startsWith('--db='));
      expect(
        buildOptions.filter((o) => !options.includes(o)),
        node,
      ).toEqual([]);
      expect(options).toEqual(
        expect.arrayContaining([
          '--http-enabled=true',
          '--hostname=${PUBLIC_URL:-http://localhost:8000}/auth',
          '--hostname-admin=${ADMIN_PUBLIC_URL:-http://localhost:8001}/auth',
          '--hostname-backchannel-dynamic=true',
          '--proxy-headers=xforwarded',
          '--cache=ispn',
          '--cache-stack=jdbc-ping',
        ]),
      );
      // The gateways wait for node 1, node 2 joins once node 1 is ready.
      expect(service(node).healthcheck?.test?.some((t) => t.includes('/health/ready'))).toBe(true);
    }
    expect(KEYCLOAK_VERSION).toBe('26.7.4');
    // The nodes differ only in the realm import, which the first node does alone.
    expect(command('keycloak-1')).toEqual([...command('keycloak-2'), '--import-realm']);
    expect(dependsOn('keycloak-2')).toEqual(['keycloak-1']);
    for (const gateway of gateways) {
      expect(dependsOn(gateway)).toEqual(['postgres', 'redis', 'keycloak-1']);
    }
  });

  it('gives Keycloak its bootstrap administrator and the secret master.json expects', () => {
    const env = environment('keycloak-1');
    for (const node of keycloakNodes) {
      const nodeEnv = environment(node);
      expect(nodeEnv.get('KC_DB'), node).toBe('postgres');
      expect(nodeEnv.get('KC_DB_URL'), node).toBe('jdbc:postgresql://postgres:5432/keycloak');
      expect(nodeEnv.get('KC_DB_USERNAME'), node).toBe(env.get('KC_DB_USERNAME'));
      expect(nodeEnv.get('KC_DB_PASSWORD'), node).toBe(env.get('KC_DB_PASSWORD'));
    }
    expect(env.get('KC_BOOTSTRAP_ADMIN_USERNAME')).toBe('${KEYCLOAK_ADMIN_USERNAME:-admin}');
    expect(env.get('KC_BOOTSTRAP_ADMIN_PASSWORD')).toMatch(/^\$\{KEYCLOAK_ADMIN_PASSWORD:\?/);
    expect(env.get('REALMGATE_KEYCLOAK_CLIENT_SECRET')).toMatch(/^\$\{KEYCLOAK_CLIENT_SECRET:\?/);
    const realm = readFileSync(path.join(root, 'realm-export/master.json'), 'utf8');
    expect(realm).toContain('"${REALMGATE_KEYCLOAK_CLIENT_SECRET}"');
    // The gateways and Keycloak agree on the administrator and the client secret.
    for (const gateway of gateways) {
      const gatewayEnv = environment(gateway);
      expect(gatewayEnv.get('KEYCLOAK_ADMIN_USERNAME')).toBe(
        env.get('KC_BOOTSTRAP_ADMIN_USERNAME'),
      );
      expect(gatewayEnv.get('KEYCLOAK_ADMIN_PASSWORD')).toBe(
        env.get('KC_BOOTSTRAP_ADMIN_PASSWORD'),
      );
      expect(gatewayEnv.get('KEYCLOAK_CLIENT_SECRET')).toBe(
        env.get('REALMGATE_KEYCLOAK_CLIENT_SECRET'),
      );
    }
  });

  it('creates the keycloak database that KC_DB_URL names', () => {
    // An inline config (`content: |`).
    expect(compose.configs?.['keycloak-database']).toEqual({
      content: 'CREATE DATABASE keycloak;\n',
    });
    expect(service('postgres').configs).toEqual([
      {
        source: 'keycloak-database',
        target: '/docker-entrypoint-initdb.d/10-keycloak-database.sql',
      },
    ]);
  });
});
