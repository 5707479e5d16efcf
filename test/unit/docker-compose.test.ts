import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KEYCLOAK_BUILD_OPTIONS, KEYCLOAK_VERSION } from '../../keycloak/distribution.ts';
import {
  configSchema,
  FILE_SETTINGS,
  loadConfig,
  requiredSecrets,
} from '../../src/config/config.ts';
import { HAPROXY_CONFIG, haproxyEnvironment } from '../ha/haproxy.ts';
import {
  healthBudgetSeconds,
  migrationStatementSeconds,
  type ServiceHealthcheck,
} from '../helpers/gateway-health-budget.ts';

/*
 * docker-compose.yml read with a YAML parser (`yaml`), validated against the Compose
 * Specification's JSON schema (`ajv`), then checked against the rest of the repository.
 */

const execFileAsync = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const composeText = readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');

/** The parts of a compose file these tests read; the schema says what else may be there. */
interface ComposeService {
  profiles?: string[];
  image?: string;
  entrypoint?: string[];
  build?: unknown;
  command?: string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  volumes?: unknown[];
  configs?: Array<{ source: string; target: string }>;
  ports?: string[];
  depends_on?: string[] | Record<string, unknown>;
  healthcheck?: { test?: string[] } & ServiceHealthcheck;
  secrets?: string[];
}
interface ComposeFile {
  services: Record<string, ComposeService>;
  configs?: Record<string, { file?: string; content?: string }>;
  secrets?: Record<string, { file?: string; environment?: string }>;
}
// `<<: *anchor` merges are YAML 1.1 merge keys, which compose reads too.
const compose = parse(composeText, { merge: true }) as ComposeFile;

/**
 * schema/compose-spec.json of the Compose Specification (github.com/compose-spec/compose-spec,
 * its commit a08f8d5 of 2025-10-21, the file's latest), copied unchanged: Copyright 2020 The
 * Compose Specification Authors, Apache License 2.0. No npm package ships it current.
 */
const composeSchema = JSON.parse(
  readFileSync(path.join(root, 'test/schemas/compose-spec.json'), 'utf8'),
) as { $schema: string };

/** Variables the compose file may interpolate besides the gateway's own: the postgres image's. */
const extraVariables = ['POSTGRES_USER', 'POSTGRES_PASSWORD'];
/** The gateway image's labels: build arguments of the Dockerfile, "unknown" unless given. */
const labelArguments = [
  'REALMGATE_VERSION',
  'REALMGATE_REVISION',
  'REALMGATE_SOURCE',
  'REALMGATE_CREATED',
];
/** The image variables, each defaulting to the upstream image (ops/images/ builds stand-ins). */
const imageDefaults: Record<string, string> = {
  NODE_IMAGE: 'node:24-bookworm-slim',
  KEYCLOAK_IMAGE: `quay.io/keycloak/keycloak:${KEYCLOAK_VERSION}`,
  POSTGRES_IMAGE: 'postgres:16',
  REDIS_IMAGE: 'redis:7',
  HAPROXY_IMAGE: 'haproxy:3.0',
};
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
/** The local stack: no profile, one of each. */
const local = ['postgres', 'redis', 'local-secrets', 'keycloak', 'gateway'];
const production = [...keycloakNodes, ...gateways, 'load-balancer'];
/** Every service that runs Keycloak, and every gateway. */
const allKeycloaks = ['keycloak', ...keycloakNodes];
const allGateways = ['gateway', ...gateways];
/** The production profile's secrets: the gateway's two, and the shared cache key. */
const composeSecrets = [...requiredSecrets, 'REALMGATE_CACHE_SECRET'];

/** Top-level `secrets:`: each name and the host variable it is made from. */
function secretSources(): Map<string, string> {
  return new Map(
    Object.entries(compose.secrets ?? {}).map(([name, source]) => {
      expect(Object.keys(source), name).toEqual(['environment']);
      return [name, source.environment!];
    }),
  );
}

/** The secrets a service is granted (short syntax: mounted as /run/secrets/<name>). */
function grantedSecrets(name: string): string[] {
  return service(name).secrets ?? [];
}

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

/** The build options of the local launcher but the database (PostgreSQL here). */
const buildOptions = KEYCLOAK_BUILD_OPTIONS.filter((o) => !o.startsWith('--db='));
/** The cache options of a cluster node, which the local stack's single node replaces. */
const clusterCache = ['--cache=ispn', '--cache-stack=jdbc-ping'];

/** The inline configs that hold the database password, and the services granted each. */
const databaseConfigs = {
  'database-password': { target: '/run/database/password', readers: ['postgres', ...allKeycloaks] },
  'database-url': { target: '/run/database/url', readers: allGateways },
};

/**
 * A gateway's configuration as loadConfig reads it, its secret files made from `given` (and its
 * database address from its config's content, interpolated with `given`).
 */
function gatewayConfig(name: string, given: Record<string, string>) {
  const env = environment(name);
  const secretsDir = mkdtempSync(path.join(tmpdir(), 'realmgate-compose-secrets-'));
  const resolved = Object.fromEntries([...env].map(([k, v]) => [k, resolve(v, given)]));
  for (const [secret, variable] of secretSources()) {
    if (!env.has(`${variable}_FILE`)) continue;
    const file = path.join(secretsDir, secret);
    writeFileSync(file, given[variable]!);
    resolved[`${variable}_FILE`] = file;
  }
  for (const { source, target } of service(name).configs ?? []) {
    const file = path.join(secretsDir, source);
    writeFileSync(file, resolve(compose.configs![source]!.content!, given));
    for (const [k, v] of Object.entries(resolved)) if (v === target) resolved[k] = file;
  }
  try {
    return loadConfig(resolved);
  } finally {
    rmSync(secretsDir, { recursive: true, force: true });
  }
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

  it('is the local stack without a profile, and the production topology behind `production`', () => {
    expect(Object.keys(compose.services)).toEqual([...local, ...production]);
    for (const name of local) expect(service(name).profiles, name).toBeUndefined();
    for (const name of production) expect(service(name).profiles, name).toEqual(['production']);
    // Both publish the same addresses: the gateway itself, or the load balancer in front.
    const published = Object.entries(compose.services).filter(([, s]) => s.ports !== undefined);
    expect(published.map(([name]) => name)).toEqual(['gateway', 'load-balancer']);
    for (const [, s] of published) expect(s.ports).toEqual(['8000:8000', '127.0.0.1:8001:8001']);
    // Naming the load balancer starts the whole profile: replicas, both nodes, the stores.
    expect(dependsOn('load-balancer')).toEqual(gateways);
    for (const gateway of gateways) {
      expect(dependsOn(gateway)).toEqual(['postgres', 'redis', ...keycloakNodes]);
    }
    expect(dependsOn('keycloak-2')).toEqual(['keycloak-1']);
    expect(dependsOn('keycloak-1')).toEqual(['postgres']);
    expect(dependsOn('gateway')).toEqual(['postgres', 'redis', 'keycloak']);
    expect(dependsOn('keycloak')).toEqual(['postgres', 'local-secrets']);
  });

  it('takes every image from a variable whose default is the upstream image', () => {
    for (const [name, s] of Object.entries(compose.services)) {
      if (s.build !== undefined) continue;
      const m = /^\$\{([A-Z_]+):-([^}]+)\}$/.exec(s.image ?? '');
      expect(m, `${name}: ${s.image}`).not.toBeNull();
      expect(imageDefaults[m![1]!], name).toBe(m![2]);
    }
    // The gateway's base image is a build argument with the Dockerfile's default.
    const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain(`ARG NODE_IMAGE=${imageDefaults.NODE_IMAGE}\nFROM \${NODE_IMAGE}`);
    // The local stand-ins (ops/images/build.sh) are named under the same variables.
    const standIns = new Map(
      lines(readFileSync(path.join(root, 'ops/images/local-images.env'), 'utf8')).map(
        (l): [string, string] => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)],
      ),
    );
    expect([...standIns.keys()].sort()).toEqual(
      ['BASE_IMAGE', ...Object.keys(imageDefaults)].sort(),
    );
    expect(standIns.get('KEYCLOAK_IMAGE')).toMatch(new RegExp(`:${KEYCLOAK_VERSION}$`));
  });

  it('mounts only files that exist in the repository', () => {
    const mounts = Object.values(compose.services).flatMap((s) => s.volumes ?? []);
    const binds = mounts
      .map((m) =>
        typeof m === 'string' ? /^(\.\.?\/[^:]*):([^:]+)(?::([a-z,]+))?$/.exec(m) : null,
      )
      .filter((m) => m !== null)
      .map((m) => ({ source: m[1]!, target: m[2]!, mode: m[3] }));
    const realm = {
      source: './realm-export/master.json',
      target: '/opt/keycloak/data/import/master.json',
      mode: 'ro',
    };
    // The two Keycloak services that import the realm.
    expect(binds).toEqual([realm, realm]);
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

  it('builds every gateway from the repository root, where the Dockerfile is', () => {
    for (const gateway of allGateways) {
      expect(service(gateway).build, gateway).toEqual({
        context: '.',
        args: {
          NODE_IMAGE: `\${NODE_IMAGE:-${imageDefaults.NODE_IMAGE}}`,
          ...Object.fromEntries(labelArguments.map((name) => [name, `\${${name}:-unknown}`])),
        },
      });
      // The checkout's build by default; a release's image by REALMGATE_IMAGE (rolling upgrades).
      expect(service(gateway).image, gateway).toBe('${REALMGATE_IMAGE:-realmgate}');
    }
    expect(existsSync(path.join(root, 'Dockerfile'))).toBe(true);
    const built = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);
    expect(built.map(([name]) => name)).toEqual(allGateways);
  });

  it("passes the image's label arguments, each one the Dockerfile declares and labels", () => {
    const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    for (const name of labelArguments) {
      expect(dockerfile, name).toContain(`\nARG ${name}=unknown\n`);
      expect(dockerfile, name).toMatch(
        new RegExp(`org\\.opencontainers\\.image\\.\\w+="\\$\\{${name}\\}"`),
      );
    }
  });

  it('interpolates only configuration variables, the postgres credentials, image names and label arguments, each with a default', () => {
    const names = [...new Set(interpolations(compose).map((i) => i.name))].sort();
    const allowed = [
      ...schemaKeys,
      ...extraVariables,
      'REALMGATE_IMAGE',
      ...Object.keys(imageDefaults),
      ...labelArguments,
    ];
    expect(names.filter((n) => !allowed.includes(n))).toEqual([]);
    expect(names).toEqual([
      'ADMIN_PUBLIC_URL',
      'AUTOMATION_UPSTREAM_URL',
      'HAPROXY_IMAGE',
      'KEYCLOAK_ADMIN_USERNAME',
      'KEYCLOAK_IMAGE',
      'LOG_LEVEL',
      'NODE_IMAGE',
      'POSTGRES_IMAGE',
      'POSTGRES_PASSWORD',
      'POSTGRES_USER',
      'PUBLIC_URL',
      'REALMGATE_CREATED',
      'REALMGATE_IMAGE',
      'REALMGATE_REVISION',
      'REALMGATE_SOURCE',
      'REALMGATE_VERSION',
      'REDIS_IMAGE',
    ]);
    // Compose interpolates the services of every profile: a required variable (`:?`) would
    // stop the local stack too. The production secrets are compose secrets instead (below).
    expect(interpolations(compose).filter((i) => i.modifier !== ':-')).toEqual([]);
  });

  it('hands every secret over as a file under /run/secrets, never in an environment', () => {
    const sources = secretSources();
    expect([...sources.values()].sort()).toEqual([...composeSecrets].sort());
    for (const gateway of gateways) {
      const env = environment(gateway);
      expect(grantedSecrets(gateway).sort(), gateway).toEqual([...sources.keys()].sort());
      for (const [secret, variable] of sources) {
        expect(FILE_SETTINGS, variable).toContain(variable);
        expect(env.get(`${variable}_FILE`), gateway).toBe(`/run/secrets/${secret}`);
        expect(env.has(variable), gateway).toBe(false);
      }
    }
    const keycloakSecrets = ['keycloak_admin_password', 'keycloak_client_secret'];
    for (const node of keycloakNodes) expect(grantedSecrets(node), node).toEqual(keycloakSecrets);
    for (const other of ['postgres', 'redis', 'load-balancer', ...local]) {
      expect(grantedSecrets(other), other).toEqual([]);
    }
    // Keycloak reads no files: the shared entry point exports what the files hold, checked.
    const entrypoint = service('keycloak').entrypoint!;
    for (const node of allKeycloaks) expect(service(node).entrypoint, node).toEqual(entrypoint);
    const script = entrypoint.join('\n').replaceAll('$$', '$');
    for (const secret of keycloakSecrets) expect(script).toContain(`/run/secrets/${secret}`);
    expect(script).toContain('export KC_BOOTSTRAP_ADMIN_PASSWORD=');
    expect(script).toContain('REALMGATE_KEYCLOAK_CLIENT_SECRET=');
    expect(script).toContain('-lt 16');
    expect(script).toContain('exec /opt/keycloak/bin/kc.sh "$@"');
    const realm = readFileSync(path.join(root, 'realm-export/master.json'), 'utf8');
    expect(realm).toContain('"${REALMGATE_KEYCLOAK_CLIENT_SECRET}"');
    for (const node of allKeycloaks) {
      const names = [...environment(node).keys()];
      expect(names.filter((n) => /PASSWORD|SECRET/.test(n))).toEqual([]);
    }
    // The local stack: local-secrets makes both files once, in a volume the two others read.
    const made = service('local-secrets').entrypoint!.join('\n');
    for (const secret of keycloakSecrets) expect(made).toContain(secret);
    for (const name of ['keycloak', 'gateway']) {
      expect(service(name).volumes, name).toContain('local-secrets:/run/secrets:ro');
    }
    const localEnv = environment('gateway');
    expect(localEnv.get('KEYCLOAK_ADMIN_PASSWORD_FILE')).toBe(
      '/run/secrets/keycloak_admin_password',
    );
    expect(localEnv.get('KEYCLOAK_CLIENT_SECRET_FILE')).toBe('/run/secrets/keycloak_client_secret');
  });

  it('hands the database password over as a file in both stacks, never in an environment', () => {
    // Inline configs: interpolated with POSTGRES_PASSWORD's default when the local stack sets
    // nothing, copied into the container by compose (not shown by `docker inspect`).
    expect(compose.configs?.['database-password']).toEqual({
      content: '${POSTGRES_PASSWORD:-realmgate-local-only}',
    });
    expect(compose.configs?.['database-url']).toEqual({
      content:
        'postgres://${POSTGRES_USER:-realmgate}:${POSTGRES_PASSWORD:-realmgate-local-only}@postgres:5432/realmgate',
    });
    for (const [source, { target, readers }] of Object.entries(databaseConfigs)) {
      const granted = Object.keys(compose.services).filter((name) =>
        (service(name).configs ?? []).some((c) => c.source === source),
      );
      expect(granted.sort(), source).toEqual([...readers].sort());
      for (const name of readers) {
        expect(service(name).configs, name).toContainEqual({ source, target });
      }
    }
    expect(environment('postgres').get('POSTGRES_PASSWORD_FILE')).toBe('/run/database/password');
    for (const gateway of allGateways) {
      expect(environment(gateway).get('DATABASE_URL_FILE'), gateway).toBe('/run/database/url');
    }
    // Keycloak has no file form of KC_DB_PASSWORD: the shared entry point exports the file's.
    const script = service('keycloak').entrypoint!.join('\n').replaceAll('$$', '$');
    expect(script).toContain('KC_DB_PASSWORD="$(cat /run/database/password)" || exit 1');
    expect(script).toContain('export KC_DB_PASSWORD');
    // No service has the password, or an address holding it, in its environment.
    for (const name of Object.keys(compose.services)) {
      for (const [key, value] of environment(name)) {
        expect(value, `${name} ${key}`).not.toContain('POSTGRES_PASSWORD');
      }
    }
  });

  it('gives both replicas the same valid configuration, of configuration variables only', () => {
    const env = environment('gateway-1');
    expect([...environment('gateway-2')]).toEqual([...env]);
    const settingOf = (k: string) => (k.endsWith('_FILE') ? k.slice(0, -'_FILE'.length) : k);
    for (const gateway of allGateways) {
      const keys = [...environment(gateway).keys()];
      expect(
        keys.filter((k) => !schemaKeys.includes(settingOf(k))),
        gateway,
      ).toEqual([]);
    }
    expect([...env.keys()].sort()).toEqual([
      'ADMIN_HOST',
      'ADMIN_PUBLIC_URL',
      'AUTOMATION_UPSTREAM_URL',
      'BACKCHANNEL_LOGOUT_URL',
      'DATABASE_URL_FILE',
      'HOST',
      'KEYCLOAK_ADMIN_PASSWORD_FILE',
      'KEYCLOAK_ADMIN_USERNAME',
      'KEYCLOAK_CLIENT_SECRET_FILE',
      'KEYCLOAK_URL',
      'LOG_LEVEL',
      'PUBLIC_URL',
      'REALMGATE_CACHE_SECRET_FILE',
      'REDIS_URL',
      'TRUSTED_PROXIES',
    ]);
    const given = {
      KEYCLOAK_ADMIN_PASSWORD: 'admin-password-0123456789',
      KEYCLOAK_CLIENT_SECRET: 'client-secret-0123456789',
      REALMGATE_CACHE_SECRET: 'cache-secret-0123456789',
    };
    const shared = {
      HOST: '0.0.0.0',
      PORT: 8000,
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: 8001,
      PUBLIC_URL: 'http://localhost:8000',
      ADMIN_PUBLIC_URL: 'http://localhost:8001',
      KEYCLOAK_ADMIN_USERNAME: 'admin',
      KEYCLOAK_ADMIN_PASSWORD: 'admin-password-0123456789',
      KEYCLOAK_CLIENT_SECRET: 'client-secret-0123456789',
      DATABASE_URL: 'postgres://realmgate:realmgate-local-only@postgres:5432/realmgate',
      REDIS_URL: 'redis://redis:6379',
    };
    // AUTOMATION_UPSTREAM_URL is empty by default, which is unset: the built-in operation list.
    expect(gatewayConfig('gateway-1', given)).not.toHaveProperty('AUTOMATION_UPSTREAM_URL');
    expect(gatewayConfig('gateway-1', given)).toMatchObject({
      ...shared,
      // Every Keycloak node, at the port and path it serves.
      KEYCLOAK_URL: keycloakNodes.map((node) => `http://${node}:8080/auth`),
      REALMGATE_CACHE_SECRET: 'cache-secret-0123456789',
      REALMGATE_DEMO: false,
      // Keycloak posts logout tokens to the load balancer's admin side (bound on :8001).
      BACKCHANNEL_LOGOUT_URL: 'http://load-balancer:8001/backchannel-logout',
    });
    expect(environment('load-balancer').get('LB_ADMIN_BIND')).toBe(':8001');
    expect(gatewayConfig('gateway', given)).toMatchObject({
      ...shared,
      KEYCLOAK_URL: ['http://keycloak:8080/auth'],
      // The local stack's one gateway: its admin listener, by service name and ADMIN_PORT.
      BACKCHANNEL_LOGOUT_URL: 'http://gateway:8001/backchannel-logout',
      REALMGATE_DEMO: true,
      DATA_DIR: '/app/.data',
    });
  });

  // A replica listens only once its migration is done: until then its health check fails,
  // and `ps` says unhealthy where the upgrade's steps wait for healthy.
  it.each(['gateway-1', 'gateway-2'])(
    "gives %s's health check the migration's bound before it counts failures",
    (name) => {
      const { healthcheck } = compose.services[name]!;
      expect(healthBudgetSeconds(healthcheck)).toBeGreaterThanOrEqual(migrationStatementSeconds);
    },
  );

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

  it('runs the Keycloak version and options of the local launcher: one node, or one cluster', () => {
    for (const node of allKeycloaks) {
      expect(service(node).image, node).toBe(
        `\${KEYCLOAK_IMAGE:-quay.io/keycloak/keycloak:${KEYCLOAK_VERSION}}`,
      );
      const options = command(node);
      expect(options[0]).toBe('start');
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
        ]),
      );
      // Dependents wait for readiness (node 2 joins once node 1 is ready).
      expect(service(node).healthcheck?.test?.some((t) => t.includes('/health/ready'))).toBe(true);
    }
    // The nodes differ only in the realm import, which the first node does alone ...
    expect(command('keycloak-1')).toEqual([...command('keycloak-2'), '--import-realm']);
    expect(command('keycloak-2')).toEqual(expect.arrayContaining(clusterCache));
    // ... and the local stack's single node only in its local caches.
    const single = command('keycloak-2').filter((o) => !clusterCache.includes(o));
    expect(command('keycloak')).toEqual([...single, '--cache=local', '--import-realm']);
  });

  it('gives Keycloak the bootstrap administrator the gateways log in as', () => {
    for (const node of allKeycloaks) {
      const env = environment(node);
      expect(env.get('KC_DB'), node).toBe('postgres');
      expect(env.get('KC_DB_URL'), node).toBe('jdbc:postgresql://postgres:5432/keycloak');
      expect(env.get('KC_DB_USERNAME'), node).toBe('${POSTGRES_USER:-realmgate}');
      expect(env.has('KC_DB_PASSWORD'), node).toBe(false);
      expect(env.get('KC_BOOTSTRAP_ADMIN_USERNAME')).toBe('${KEYCLOAK_ADMIN_USERNAME:-admin}');
    }
    for (const gateway of allGateways) {
      expect(environment(gateway).get('KEYCLOAK_ADMIN_USERNAME')).toBe(
        '${KEYCLOAK_ADMIN_USERNAME:-admin}',
      );
    }
  });

  it('creates the keycloak database that KC_DB_URL names', () => {
    // An inline config (`content: |`).
    expect(compose.configs?.['keycloak-database']).toEqual({
      content: 'CREATE DATABASE keycloak;\n',
    });
    expect(service('postgres').configs).toContainEqual({
      source: 'keycloak-database',
      target: '/docker-entrypoint-initdb.d/10-keycloak-database.sql',
    });
  });
});

/**
 * `docker compose config` of the shipped file: the real Compose (Compose v2, which `.ci/run`
 * installs), run with nothing of this machine's environment or of a `.env` file but `given`. It
 * needs no Docker engine.
 */
async function composeConfig(
  profiles: string[],
  given: Record<string, string> = {},
  services: string[] = [],
): Promise<{ code: number; rendered: string; stderr: string }> {
  const args = ['compose', '--env-file', '/dev/null', '-p', 'realmgate-config-test'];
  args.push('--project-directory', root, '-f', path.join(root, 'docker-compose.yml'));
  for (const profile of profiles) args.push('--profile', profile);
  try {
    const { stdout, stderr } = await execFileAsync('docker', [...args, 'config', ...services], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...given },
    });
    return { code: 0, rendered: stdout, stderr };
  } catch (err) {
    const failed = err as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw err;
    return { code: failed.code, rendered: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** The production profile's secrets as an operator gives them, but the database password. */
const operatorSecrets = {
  KEYCLOAK_ADMIN_PASSWORD: 'admin-password-0123456789',
  KEYCLOAK_CLIENT_SECRET: 'client-secret-0123456789',
  REALMGATE_CACHE_SECRET: 'cache-secret-0123456789',
};
const localOnlyPassword = 'realmgate-local-only';

describe('docker compose config of docker-compose.yml', () => {
  it('renders the local stack with nothing set, on the local-only database password', async () => {
    const { code, rendered, stderr } = await composeConfig([]);
    expect(code, stderr).toBe(0);
    const project = parse(rendered) as ComposeFile;
    expect(Object.keys(project.services).sort()).toEqual([...local].sort());
    expect(project.configs?.['database-password']?.content).toBe(localOnlyPassword);
  });

  it.each([
    ['nothing set', operatorSecrets],
    ['POSTGRES_PASSWORD empty', { ...operatorSecrets, POSTGRES_PASSWORD: '' }],
  ])(
    'refuses the production profile without a database password of its own (%s)',
    async (_, given) => {
      const { code, rendered, stderr } = await composeConfig(['production'], given);
      expect(code).not.toBe(0);
      expect(rendered).not.toContain(localOnlyPassword);
      expect(stderr).toContain('POSTGRES_PASSWORD');
    },
  );

  // Naming a service of a profile enables it without `--profile`: each that reads the database.
  it.each([...keycloakNodes, ...gateways])(
    'refuses %s named alone without a database password of its own',
    async (name) => {
      const { code, stderr } = await composeConfig([], operatorSecrets, [name]);
      expect(code).not.toBe(0);
      expect(stderr).toContain('POSTGRES_PASSWORD');
    },
  );

  it("renders the production profile on the operator's database password, never the local one", async () => {
    const password = 'operator-chosen-0123456789';
    const given = { ...operatorSecrets, POSTGRES_PASSWORD: password };
    const { code, rendered, stderr } = await composeConfig(['production'], given);
    expect(code, stderr).toBe(0);
    expect(rendered).not.toContain(localOnlyPassword);
    const project = parse(rendered) as ComposeFile;
    expect(Object.keys(project.services).sort()).toEqual([...local, ...production].sort());
    expect(project.configs?.['database-password']?.content).toBe(password);
    expect(project.configs?.['database-url']?.content).toBe(
      `postgres://realmgate:${password}@postgres:5432/realmgate`,
    );
    // Still a file only: no rendered environment holds it.
    for (const [name, s] of Object.entries(project.services)) {
      expect(JSON.stringify(s.environment ?? {}), name).not.toContain(password);
    }
  });
});
