import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  CHART_SECRETS,
  CHART_SETTINGS,
  GATEWAY_DEFAULTS_FILE,
  gatewayDefaultsText,
  REQUIRED_SECRETS,
  VALUES_SCHEMA_FILE,
  valuesSchemaText,
} from '../../../scripts/chart-schema.ts';
import { createApp } from '../../../src/app.ts';
import { configSchema, FILE_SETTINGS, loadConfig } from '../../../src/config/config.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { metricsOff } from '../../../src/metrics/metrics.ts';
import { buildInfo } from '../../../src/release/build-info.ts';
import { closeServer, listen } from '../../../src/server.ts';
import { chart, examples, ofKind, render } from '../../helpers/helm-chart.ts';

/*
 * The chart cannot drift from the gateway: its values schema is generated from src/config, it
 * names only the gateway's settings, the gateway accepts the configuration it renders, and its
 * probes ask for routes the gateway's app serves.
 */

const cases: Array<[string, string[]]> = [
  ['the default values', []],
  ...examples.map((file): [string, string[]] => [`examples/${path.basename(file)}`, [file]]),
];

describe("the chart's settings", () => {
  it('values.schema.json and files/gateway-defaults.json are those scripts/chart-schema.ts generates (npm run chart:schema)', () => {
    expect(readFileSync(VALUES_SCHEMA_FILE, 'utf8')).toBe(valuesSchemaText());
    expect(readFileSync(GATEWAY_DEFAULTS_FILE, 'utf8')).toBe(gatewayDefaultsText());
  });

  it('are settings of src/config: credentials only in the Secret, the rest in the ConfigMap', () => {
    for (const name of [...CHART_SETTINGS, ...CHART_SECRETS])
      expect(configSchema.shape).toHaveProperty(name);
    expect(CHART_SECRETS.filter((name) => !FILE_SETTINGS.includes(name))).toEqual([]);
    expect(CHART_SETTINGS.filter((name) => FILE_SETTINGS.includes(name))).toEqual([]);
    // values.yaml shows the operator every one of them.
    const values = parse(readFileSync(path.join(chart, 'values.yaml'), 'utf8')) as {
      config: Record<string, unknown>;
    };
    expect(
      Object.keys(values.config).sort(),
      'charts/realmgate/values.yaml lists every setting of the chart (scripts/chart-schema.ts)',
    ).toEqual([...CHART_SETTINGS].sort());
    // Every rendered ConfigMap key, the chart's own (HOST, ADMIN_HOST) included.
    const objects = render(
      [],
      CHART_SETTINGS.filter((n) => n.endsWith('_SECONDS')).map((n) => `config.${n}=7`),
    );
    const data = ofKind<IConfigMap>(objects, 'ConfigMap')[0]!.data!;
    for (const name of Object.keys(data)) {
      expect(configSchema.shape, name).toHaveProperty(name);
      expect(FILE_SETTINGS, name).not.toContain(name);
    }
  });

  it.each(cases)('of %s, as rendered, are accepted by the gateway', (_, files) => {
    const objects = render(files, ['config.LOGIN_MAX_FAILURES_PER_ADDRESS=1000000']);
    const data = ofKind<IConfigMap>(objects, 'ConfigMap')[0]!.data!;
    // Large numbers are written whole, not as 1e+06.
    expect(data.LOGIN_MAX_FAILURES_PER_ADDRESS).toBe('1000000');
    const [deployment] = ofKind<IDeployment>(objects, 'Deployment');
    const container = deployment!.spec!.template.spec!.containers[0]!;
    // The Secret's files where the `_FILE` variables point, from the chart's Secret or made up.
    const secret = ofKind<ISecret>(objects, 'Secret')[0]?.data;
    const dir = mkdtempSync(path.join(tmpdir(), 'realmgate-chart-'));
    mkdirSync(path.join(dir, '..2026_11_28'));
    symlinkSync('..2026_11_28', path.join(dir, '..data'));
    try {
      const env: Record<string, string> = { ...data };
      for (const variable of container.env!) {
        const name = variable.name.replace(/_FILE$/, '');
        const value = secret?.[name]
          ? Buffer.from(secret[name], 'base64').toString()
          : name.endsWith('_URL')
            ? name === 'REDIS_URL'
              ? 'redis://made-up-host:1/0'
              : 'postgres://made-up-host:1/db'
            : 'a-made-up-secret-of-32-characters';
        // As the kubelet lays a Secret out: each key a link through `..data` to the files.
        writeFileSync(path.join(dir, '..2026_11_28', name), value);
        symlinkSync(`..data/${name}`, path.join(dir, name));
        env[variable.name] = path.join(dir, name);
      }
      const config = loadConfig(env);
      expect(config.PORT).toBe(Number(data.PORT));
      expect(config.KEYCLOAK_URL!.length).toBeGreaterThan(0);
      for (const name of REQUIRED_SECRETS) expect(config[name], name).toBeDefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the chart's schema and the gateway", () => {
  // The settings whose values JSON Schema's types alone do not check (helm asserts no
  // `format`, nor compares settings): a value helm accepts would stop every new replica at
  // its start.
  const probes: Array<[string, string[]]> = [
    [
      'PUBLIC_URL',
      ['https://api.example.com', 'http://10.0.0.1:8000/', 'api.example.com', 'ftp://x', 'http://'],
    ],
    ['AUTOMATION_UPSTREAM_URL', ['http://automation:8080', 'automation:8080', 'https//x']],
    [
      'KEYCLOAK_URL',
      [
        'http://keycloak-service:8080/auth',
        'http://kc-0:8080/auth, https://kc-1/auth',
        'keycloak-service:8080/auth',
        'http://kc-0:8080/auth,kc-1:8080/auth',
        'http://kc-0:8080/auth,',
      ],
    ],
    ['DPOP_ALGORITHMS', ['ES256', 'ES256, PS256 EdDSA', 'HS256', 'ES256,none', 'auto']],
    [
      'TRUSTED_PROXIES',
      [
        '10.0.0.0/8',
        ' 10.0.0.0/8, ::1 ,fd00::/8,',
        '192.168.1.1,2001:db8::/128,10.0.0.0/032,::ffff:10.0.0.0/104,::/0',
        'fe80::1%eth0',
        '10.0.0.0/33',
        '2001:db8::/129',
        '10.0.0.0/',
        '10.0.0/8',
        '10.0.0.01',
        '10.0.0.0/8;10.1.0.0/16',
        '10.0.0.0/8/8',
        'ingress-nginx',
        '2001:db8:::1',
      ],
    ],
    // Checked across settings at start, the others at the gateway's defaults.
    ['AUDIT_RETENTION_DAYS', ['1', '89', '90', '365', '3650', '3651']],
    ['AUDIT_RETENTION_MIN_DAYS', ['1', '365', '366']],
    ['AUDIT_RETENTION_MAX_DAYS', ['364', '365', '36500']],
    ['AUDIT_OTEL_LOGS', ['true', 'false']],
  ];
  const secrets = {
    KEYCLOAK_ADMIN_PASSWORD: 'x'.repeat(16),
    KEYCLOAK_CLIENT_SECRET: 'y'.repeat(16),
  };
  // Up to 13 helm renders in one test: seconds on a busy machine.
  const RENDERS_TIMEOUT_MS = 60_000;
  it.each(probes)(
    'agree on what %s may be',
    (name, values) => {
      for (const value of values) {
        let objects: ReturnType<typeof render> | undefined;
        try {
          objects = render([], [`config.${name}=${value.replaceAll(',', '\\,')}`]);
        } catch {
          objects = undefined;
        }
        const data = objects && ofKind<IConfigMap>(objects, 'ConfigMap')[0]!.data!;
        const env = data ?? { KEYCLOAK_URL: 'http://kc:8080/auth', [name]: value };
        let gateway = true;
        try {
          loadConfig({ ...env, ...secrets });
        } catch {
          gateway = false;
        }
        expect(objects !== undefined, `${name}=${value}: helm accepts it as the gateway does`).toBe(
          gateway,
        );
      }
    },
    RENDERS_TIMEOUT_MS,
  );
});

describe('the chart behind its Ingress', () => {
  // Every client then reaches the gateway through the ingress controller: unless its
  // X-Forwarded-For is believed, they are all one address, for the per-address login limit
  // (LOGIN_MAX_FAILURES_PER_ADDRESS) and in the audit log.
  const ingress = [
    'ingress.enabled=true',
    'ingress.hosts[0].host=api.example.com',
    'ingress.hosts[0].paths[0].path=/',
    'ingress.hosts[0].paths[0].pathType=Prefix',
  ];

  it('is refused without TRUSTED_PROXIES, naming the setting', () => {
    expect(() => render([], ingress)).toThrow(/ingress\.enabled needs config\.TRUSTED_PROXIES/);
  });

  it("believes the ingress controller's X-Forwarded-For once TRUSTED_PROXIES names its pods", () => {
    const objects = render([], [...ingress, 'config.TRUSTED_PROXIES=10.244.0.0/16']);
    const data = ofKind<IConfigMap>(objects, 'ConfigMap')[0]!.data!;
    const config = loadConfig({
      ...data,
      KEYCLOAK_ADMIN_PASSWORD: 'x'.repeat(16),
      KEYCLOAK_CLIENT_SECRET: 'y'.repeat(16),
    });
    expect(config.TRUSTED_PROXIES!.check('10.244.3.7', 'ipv4')).toBe(true);
    expect(ofKind(objects, 'Ingress')).toHaveLength(1);
  });

  // Tokens' issuer, DPoP proofs' htu, the protected-resource metadata and redirects name
  // PUBLIC_URL: behind an Ingress it is the Ingress's address, not the gateway's localhost.
  const proxied = [...ingress, 'config.TRUSTED_PROXIES=10.244.0.0/16'];
  const publicUrlOf = (sets: string[]) =>
    ofKind<IConfigMap>(render([], [...proxied, ...sets]), 'ConfigMap')[0]!.data!.PUBLIC_URL;

  it("takes PUBLIC_URL from the Ingress's host when it is not set: https with TLS for it", () => {
    expect(publicUrlOf([])).toBe('http://api.example.com');
    expect(
      publicUrlOf(['ingress.tls[0].secretName=api-tls', 'ingress.tls[0].hosts[0]=api.example.com']),
    ).toBe('https://api.example.com');
    // TLS for another host only: this one is served over HTTP.
    expect(
      publicUrlOf(['ingress.tls[0].secretName=w-tls', 'ingress.tls[0].hosts[0]=www.example.com']),
    ).toBe('http://api.example.com');
    // A URL set is kept (a CDN in front, say).
    expect(publicUrlOf(['config.PUBLIC_URL=https://id.example.com'])).toBe(
      'https://id.example.com',
    );
  });

  it.each([
    [['config.PUBLIC_URL=http://localhost:8000'], /config\.PUBLIC_URL.*localhost/],
    [['config.PUBLIC_URL=http://127.0.0.1:8000/'], /config\.PUBLIC_URL.*localhost/],
    [
      [
        'ingress.hosts[1].host=www.example.com',
        'ingress.hosts[1].paths[0].path=/',
        'ingress.hosts[1].paths[0].pathType=Prefix',
      ],
      /several hosts.*config\.PUBLIC_URL/,
    ],
    [['ingress.hosts[0].host=*.example.com'], /config\.PUBLIC_URL/],
  ])('is refused when PUBLIC_URL cannot be the Ingress address (%j)', (sets, message) => {
    expect(() => render([], [...proxied, ...sets])).toThrow(message);
  });
});

describe("the chart's optional credentials", () => {
  it('take the audit signing keys from an existing Secret, as files the gateway reads', () => {
    const extra = ['AUDIT_SIGNING_KEY', 'AUDIT_SIGNING_PREVIOUS_KEYS'] as const;
    const keys = [...REQUIRED_SECRETS, ...extra];
    const objects = render([], [`secrets.keys={${keys.join(',')}}`]);
    const data = ofKind<IConfigMap>(objects, 'ConfigMap')[0]!.data!;
    const [deployment] = ofKind<IDeployment>(objects, 'Deployment');
    const pod = deployment!.spec!.template.spec!;
    const items = pod.volumes!.find((volume) => volume.name === 'secrets')!.secret!.items!;
    expect(items.map((item) => item.key)).toEqual(keys);
    const current = generateKeyPairSync('ed25519');
    const previous = generateKeyPairSync('ed25519');
    const files: Record<string, string> = {
      AUDIT_SIGNING_KEY: current.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      AUDIT_SIGNING_PREVIOUS_KEYS: previous.publicKey
        .export({ format: 'pem', type: 'spki' })
        .toString(),
      DATABASE_URL: 'postgres://made-up-host:1/db',
      REDIS_URL: 'redis://made-up-host:1',
    };
    const dir = mkdtempSync(path.join(tmpdir(), 'realmgate-chart-'));
    try {
      const env: Record<string, string> = { ...data };
      for (const variable of pod.containers[0]!.env!) {
        const name = variable.name.replace(/_FILE$/, '');
        expect(variable.value).toBe(`/run/secrets/realmgate/${name}`);
        writeFileSync(path.join(dir, name), files[name] ?? 'a-made-up-secret-of-32-characters');
        env[variable.name] = path.join(dir, name);
      }
      const config = loadConfig(env);
      // The files' final newline is not part of the setting.
      for (const name of extra) expect(config[name], name).toBe(files[name]!.trimEnd());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the chart's probes", () => {
  const servers: Server[] = [];
  afterAll(() => servers.forEach((server) => server.close()));

  it("ask for routes the gateway's public listener serves", async () => {
    const app = createApp(
      {
        logger: createLogger('silent'),
        authMount: () => (_req, _res, next) => next(),
        backchannelLogout: (_req, _res, next) => next(),
        resourceMetadata: (_req, _res, next) => next(),
        auditKeys: (_req, _res, next) => next(),
        api: (_req, _res, next) => next(),
        readiness: {},
        build: buildInfo({}),
        isShuttingDown: () => false,
        metrics: metricsOff,
      },
      'public',
    );
    const server = createServer(app);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const [deployment] = ofKind<IDeployment>(render([]), 'Deployment');
    const container = deployment!.spec!.template.spec!.containers[0]!;
    const paths = [container.startupProbe, container.livenessProbe, container.readinessProbe].map(
      (probe) => probe!.httpGet!.path!,
    );
    for (const probePath of [...new Set(paths)]) {
      const res = await fetch(base + probePath);
      expect(res.status, probePath).toBe(200);
      expect(await res.json()).toMatchObject({ message: 'SUCCESS', result: '000-00000' });
    }
    // A path the app does not serve is 404: the check above tells them apart.
    expect((await fetch(`${base}/healthy`)).status).toBe(404);
  });
});

describe("the chart's listeners", () => {
  // The kubelet probes, and Services send to, the pod's address: an IPv4 one, an IPv6 one
  // (single-stack IPv6 clusters) or both. The addresses the chart gives the gateway take both.
  it.each(['HOST', 'ADMIN_HOST'])('%s accepts connections over IPv4 and IPv6', async (name) => {
    const data = ofKind<IConfigMap>(render([]), 'ConfigMap')[0]!.data!;
    const server = await listen(
      (_req, res) => res.end('listening'),
      data[name]!,
      0,
      createLogger('silent'),
    );
    try {
      const { port } = server.address() as AddressInfo;
      for (const address of ['127.0.0.1', '[::1]']) {
        const res = await fetch(`http://${address}:${port}/`);
        expect(await res.text(), address).toBe('listening');
      }
    } finally {
      await closeServer(server, 0);
    }
  });
});
