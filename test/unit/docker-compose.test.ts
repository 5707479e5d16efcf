import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { KEYCLOAK_BUILD_OPTIONS, KEYCLOAK_VERSION } from '../../keycloak/distribution.ts';
import {
  configSchema,
  FILE_SETTINGS,
  loadConfig,
  requiredSecrets,
} from '../../src/config/config.ts';

/*
 * No YAML dependency: docker-compose.yml is read with a few indentation rules that hold for
 * the way it is written (two-space indentation, block style, one entry per line).
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const composeText = readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');

/** Variables the compose file may interpolate besides the gateway's own (the postgres image's). */
const extraVariables = ['POSTGRES_USER', 'POSTGRES_PASSWORD'];
const schemaKeys = Object.keys(configSchema.shape);

interface Line {
  indent: number;
  text: string;
}

/** Non-blank lines without comment lines (no value in this file contains ` #`). */
function lines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.trim().startsWith('#'))
    .map((l) => ({ indent: l.length - l.trimStart().length, text: l.trim() }));
}

/** The lines nested under `key:` (found at `indent`), or undefined when absent. */
function block(of: Line[], key: string, indent: number): Line[] | undefined {
  const start = of.findIndex((l) => l.indent === indent && l.text.startsWith(`${key}:`));
  if (start === -1) return undefined;
  const end = of.findIndex((l, i) => i > start && l.indent <= indent);
  return of.slice(start + 1, end === -1 ? undefined : end);
}

function unquote(value: string): string {
  const v = value.trim();
  return /^(['"]).*\1$/.test(v) ? v.slice(1, -1) : v;
}

/** `KEY: value` and `- KEY=value` entries directly inside a block. */
function entries(of: Line[]): Array<[string, string]> {
  const indent = Math.min(...of.map((l) => l.indent));
  return of
    .filter((l) => l.indent === indent)
    .map((l): [string, string] => {
      const listItem = /^-\s+(['"]?)([A-Za-z_][A-Za-z0-9_]*)=(.*)\1$/.exec(l.text);
      if (listItem) return [listItem[2]!, listItem[3]!];
      const mapping = /^([A-Za-z_][A-Za-z0-9_-]*):\s*(.*)$/.exec(l.text);
      if (mapping) return [mapping[1]!, unquote(mapping[2]!)];
      throw new Error(`cannot read entry: ${l.text}`);
    });
}

/** `- item` values directly inside a block. */
function listItems(of: Line[]): string[] {
  const indent = Math.min(...of.map((l) => l.indent));
  return of
    .filter((l) => l.indent === indent && l.text.startsWith('- '))
    .map((l) => unquote(l.text.slice(2)));
}

const all = lines(composeText);
const services = block(all, 'services', 0) ?? [];

function service(name: string): Line[] {
  const found = block(services, name, 2);
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
}

function environment(name: string): Map<string, string> {
  return new Map(entries(block(service(name), 'environment', 4) ?? []));
}

/** Every interpolation in the compose file: `${NAME...}` and `$NAME`, but not escaped `$$`. */
function interpolations(text: string): Array<{ name: string; modifier: string }> {
  const found: Array<{ name: string; modifier: string }> = [];
  for (const m of text.matchAll(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
  )) {
    if (m[0] === '$$') continue;
    found.push({ name: m[1] ?? m[3]!, modifier: m[2]?.slice(0, 2) ?? '' });
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

/** Top-level `secrets:`: each name and the host variable it is made from. */
function secretSources(): Map<string, string> {
  const secrets = block(all, 'secrets', 0) ?? [];
  return new Map(
    entries(secrets.filter((l) => l.indent === 2)).map(([name]) => {
      const source = entries(block(secrets, name, 2) ?? []);
      expect(source, name).toHaveLength(1);
      expect(source[0]![0], name).toBe('environment');
      return [name, source[0]![1]];
    }),
  );
}

/** The secrets a service is granted (short syntax: mounted as /run/secrets/<name>). */
function grantedSecrets(name: string): string[] {
  return listItems(block(service(name), 'secrets', 4) ?? []);
}

function command(name: string): string[] {
  return listItems(block(service(name), 'command', 4) ?? []);
}

function dependsOn(name: string): string[] {
  const of = block(service(name), 'depends_on', 4) ?? [];
  const indent = Math.min(...of.map((l) => l.indent));
  return of.filter((l) => l.indent === indent).map((l) => l.text.replace(/^- |:$/g, ''));
}

/** The text of an inline config (`configs: name: content: |`). */
function configContent(name: string): string[] {
  const configs = block(all, 'configs', 0) ?? [];
  const content = block(configs, name, 2) ?? [];
  expect(content[0]?.text).toBe('content: |');
  return content.slice(1).map((l) => l.text);
}

describe('docker-compose.yml', () => {
  it('declares the production topology: two Keycloak nodes, two gateways, a load balancer', () => {
    expect(
      entries(services.filter((l) => l.indent === 2 && l.text.endsWith(':'))).map(([k]) => k),
    ).toEqual(['postgres', 'redis', ...keycloakNodes, ...gateways, 'load-balancer']);
  });

  it('mounts only files that exist in the repository', () => {
    const binds = all
      .map((l) => /^-\s+['"]?(\.\.?\/[^:'"]*):([^:'"]+)(?::([a-z,]+))?['"]?$/.exec(l.text))
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
    expect(all.filter((l) => /^source:\s*['"]?\./.test(l.text))).toEqual([]);
  });

  it('builds both gateways from the repository root, where the Dockerfile is', () => {
    for (const gateway of gateways) {
      const build = block(service(gateway), 'build', 4);
      expect(build && entries(build), gateway).toEqual([['context', '.']]);
    }
    expect(statSync(path.join(root, '.')).isDirectory()).toBe(true);
    expect(existsSync(path.join(root, 'Dockerfile'))).toBe(true);
    // No other service is built.
    expect(all.filter((l) => l.text.startsWith('build:')).length).toBe(gateways.length);
  });

  it('interpolates only configuration variables and the postgres credentials', () => {
    const names = [...new Set(interpolations(composeText).map((i) => i.name))].sort();
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
    ]);
  });

  it('requires the secrets wherever they are used', () => {
    const uses = (name: string) => interpolations(composeText).filter((i) => i.name === name);
    // Keycloak node 1 (which creates the administrator and imports the realm) reads no files:
    // `${NAME:?message}` there; the gateways get files made from the same variables, which
    // compose refuses to make while the variable is unset.
    for (const secret of requiredSecrets) {
      expect(
        uses(secret).map((u) => u.modifier),
        secret,
      ).toEqual([':?']);
    }
    expect(uses('REALMGATE_CACHE_SECRET')).toEqual([]);
    expect([...secretSources().values()].sort()).toEqual([...composeSecrets].sort());
    // Nothing else is required and nothing is used without a default.
    const others = interpolations(composeText).filter((i) => !composeSecrets.includes(i.name));
    expect(others.filter((i) => i.modifier !== ':-')).toEqual([]);
  });

  it('hands the gateways their secrets as files (<NAME>_FILE), never in the environment', () => {
    const sources = secretSources();
    for (const gateway of gateways) {
      const env = environment(gateway);
      const granted = grantedSecrets(gateway);
      expect(granted.sort(), gateway).toEqual([...sources.keys()].sort());
      for (const [secret, variable] of sources) {
        expect(FILE_SETTINGS, variable).toContain(variable);
        expect(env.get(`${variable}_FILE`), gateway).toBe(`/run/secrets/${secret}`);
        expect(env.has(variable), gateway).toBe(false);
      }
    }
    // No other service is given the gateways' secrets.
    for (const other of ['postgres', 'redis', ...keycloakNodes, 'load-balancer']) {
      expect(grantedSecrets(other), other).toEqual([]);
    }
  });

  it('gives both gateways the same valid configuration, of configuration variables only', () => {
    const env = environment('gateway-1');
    expect([...environment('gateway-2')]).toEqual([...env]);
    const settingOf = (k: string) => (k.endsWith('_FILE') ? k.slice(0, -'_FILE'.length) : k);
    expect([...env.keys()].filter((k) => !schemaKeys.includes(settingOf(k)))).toEqual([]);
    expect([...env.keys()].sort()).toEqual([
      'ADMIN_HOST',
      'ADMIN_PUBLIC_URL',
      'DATABASE_URL',
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
    // The files compose makes under /run/secrets, made here from the same variables.
    const secretsDir = mkdtempSync(path.join(tmpdir(), 'realmgate-compose-secrets-'));
    const resolved = Object.fromEntries([...env].map(([k, v]) => [k, resolve(v, given)]));
    for (const [secret, variable] of secretSources()) {
      const file = path.join(secretsDir, secret);
      writeFileSync(file, given[variable as keyof typeof given]);
      resolved[`${variable}_FILE`] = file;
    }
    let config;
    try {
      config = loadConfig(resolved);
    } finally {
      rmSync(secretsDir, { recursive: true, force: true });
    }
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
  });

  it('publishes the load balancer only: the public listener, and the admin one on loopback', () => {
    expect(listItems(block(service('load-balancer'), 'ports', 4) ?? [])).toEqual([
      '8000:8000',
      '127.0.0.1:8001:8001',
    ]);
    for (const name of [...gateways, ...keycloakNodes]) {
      expect(block(service(name), 'ports', 4), name).toBeUndefined();
    }
  });

  it('balances over both gateways, each checked by its /readyz, on both listeners', () => {
    const haproxy = configContent('haproxy');
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

  it("trusts X-Forwarded-* from the load balancer's fixed address only", () => {
    const address = block(block(service('load-balancer'), 'networks', 4) ?? [], 'default', 6);
    expect(address?.map((l) => l.text)).toEqual(['ipv4_address: 172.30.0.10']);
    const subnet = block(all, 'networks', 0)?.find((l) => l.text.startsWith('- subnet:'));
    expect(subnet?.text).toBe('- subnet: 172.30.0.0/24');
    expect(environment('gateway-1').get('TRUSTED_PROXIES')).toBe('172.30.0.10');
  });

  it('runs the Keycloak version and options of the local launcher, as one cluster', () => {
    for (const node of keycloakNodes) {
      const image = entries(service(node).filter((l) => l.indent === 4)).find(
        ([k]) => k === 'image',
      );
      expect(image, node).toEqual(['image', `quay.io/keycloak/keycloak:${KEYCLOAK_VERSION}`]);
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
      expect(
        block(service(node), 'healthcheck', 4)?.some((l) => l.text.includes('/health/ready')),
      ).toBe(true);
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
    // The gateways and Keycloak agree on the administrator and the client secret: the
    // gateways' files are made from the variables Keycloak's environment interpolates.
    const sources = secretSources();
    const variableOfFile = (gatewayEnv: Map<string, string>, name: string) =>
      sources.get(gatewayEnv.get(`${name}_FILE`)!.replace('/run/secrets/', ''));
    const interpolated = (value: string | undefined) => interpolations(value ?? '')[0]?.name;
    for (const gateway of gateways) {
      const gatewayEnv = environment(gateway);
      expect(gatewayEnv.get('KEYCLOAK_ADMIN_USERNAME')).toBe(
        env.get('KC_BOOTSTRAP_ADMIN_USERNAME'),
      );
      expect(variableOfFile(gatewayEnv, 'KEYCLOAK_ADMIN_PASSWORD')).toBe(
        interpolated(env.get('KC_BOOTSTRAP_ADMIN_PASSWORD')),
      );
      expect(variableOfFile(gatewayEnv, 'KEYCLOAK_CLIENT_SECRET')).toBe(
        interpolated(env.get('REALMGATE_KEYCLOAK_CLIENT_SECRET')),
      );
    }
  });

  it('creates the keycloak database that KC_DB_URL names', () => {
    expect(configContent('keycloak-database')).toEqual(['CREATE DATABASE keycloak;']);
    expect(listItems(block(service('postgres'), 'configs', 4) ?? [])).toEqual([
      'source: keycloak-database',
    ]);
    expect(composeText).toContain('target: /docker-entrypoint-initdb.d/10-keycloak-database.sql');
  });
});
