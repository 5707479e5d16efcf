import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { KEYCLOAK_BUILD_OPTIONS, KEYCLOAK_VERSION } from '../../keycloak/distribution.ts';
import { configSchema, loadConfig, requiredSecrets } from '../../src/config/config.ts';
import { HAPROXY_CONFIG, haproxyEnvironment } from '../ha/haproxy.ts';

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

/** The file of a config kept in a file of its own (`configs: name: file: ./path`). */
function configFile(name: string): string {
  const configs = block(all, 'configs', 0) ?? [];
  const [file, ...rest] = entries(block(configs, name, 2) ?? []);
  expect(rest).toEqual([]);
  expect(file?.[0]).toBe('file');
  return file![1];
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
  return lines(text).map((l) => l.text);
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
    // Configs kept in files of their own: HAProxy's only.
    const files = all.filter((l) => l.text.startsWith('file:')).map((l) => l.text);
    expect(files).toEqual(['file: ./ops/haproxy/haproxy.cfg']);
    expect(existsSync(path.join(root, configFile('haproxy')))).toBe(true);
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
      'REALMGATE_CACHE_SECRET',
    ]);
  });

  it('requires the secrets (`${NAME:?message}`) wherever they are used', () => {
    const uses = (name: string) => interpolations(composeText).filter((i) => i.name === name);
    // Keycloak node 1 (which creates the administrator and imports the realm) and each gateway.
    for (const secret of requiredSecrets) {
      expect(
        uses(secret).map((u) => u.modifier),
        secret,
      ).toEqual([':?', ':?', ':?']);
    }
    expect(uses('REALMGATE_CACHE_SECRET').map((u) => u.modifier)).toEqual([':?', ':?']);
    // Nothing else is required and nothing is used without a default.
    const others = interpolations(composeText).filter((i) => !composeSecrets.includes(i.name));
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
    expect(listItems(block(service('load-balancer'), 'ports', 4) ?? [])).toEqual([
      '8000:8000',
      '127.0.0.1:8001:8001',
    ]);
    for (const name of [...gateways, ...keycloakNodes]) {
      expect(block(service(name), 'ports', 4), name).toBeUndefined();
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
    expect(configContent('keycloak-database')).toEqual(['CREATE DATABASE keycloak;']);
    expect(listItems(block(service('postgres'), 'configs', 4) ?? [])).toEqual([
      'source: keycloak-database',
    ]);
    expect(composeText).toContain('target: /docker-entrypoint-initdb.d/10-keycloak-database.sql');
  });
});
