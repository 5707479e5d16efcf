import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { chart, examples, helm, valueArgs } from '../../helpers/helm-chart.ts';

/*
 * helm itself refuses a wrong values file, with a message, before anything is applied: by
 * values.schema.json (install, upgrade, lint and template all check it) or, for what a schema
 * cannot say, by the templates' `fail`.
 */

const dir = mkdtempSync(path.join(tmpdir(), 'realmgate-values-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let written = 0;
function valuesFile(values: unknown): string {
  const file = path.join(dir, `values-${++written}.yaml`);
  writeFileSync(file, stringify(values));
  return file;
}

/** helm's verdict on the default values with `values` over them, by template and by lint. */
function refusal(values: unknown): string {
  const file = valuesFile(values);
  const template = helm('template', 'rg', chart, ...valueArgs([file]));
  expect(template.status, template.stdout).not.toBe(0);
  return template.stderr;
}

describe('a values file helm refuses', () => {
  it.each([
    [
      'a string for a count',
      { replicaCount: 'two' },
      "at '/replicaCount': got string, want integer",
    ],
    [
      'a string for a setting that counts',
      { config: { LOGIN_FAILURE_WINDOW_SECONDS: '5s' } },
      "at '/config/LOGIN_FAILURE_WINDOW_SECONDS'",
    ],
    ['an unknown key', { replicas: 3 }, "additional properties 'replicas' not allowed"],
    [
      'an unknown setting',
      { config: { KEYCLOAK_REALM: 'x' } },
      "additional properties 'KEYCLOAK_REALM' not allowed",
    ],
    ['a port out of range', { config: { ADMIN_PORT: 70000 } }, "at '/config/ADMIN_PORT': maximum"],
    ['a Service port out of range', { service: { port: 0 } }, "at '/service/port': minimum"],
    [
      'a setting out of its range',
      { config: { SHUTDOWN_GRACE_SECONDS: 301 } },
      "at '/config/SHUTDOWN_GRACE_SECONDS': maximum",
    ],
    [
      'a value not among its choices',
      { config: { LOG_LEVEL: 'verbose' } },
      "at '/config/LOG_LEVEL'",
    ],
    [
      'a public address without its scheme',
      { config: { PUBLIC_URL: 'api.example.com' } },
      "at '/config/PUBLIC_URL'",
    ],
    [
      'a Keycloak node without its scheme',
      { config: { KEYCLOAK_URL: 'http://kc-0:8080/auth,kc-1:8080/auth' } },
      "at '/config/KEYCLOAK_URL'",
    ],
    [
      'a trusted proxy range beyond its bits',
      { config: { TRUSTED_PROXIES: '10.0.0.0/8,10.1.0.0/33' } },
      "at '/config/TRUSTED_PROXIES'",
    ],
    [
      'a symmetric DPoP algorithm',
      { config: { DPOP_ALGORITHMS: 'ES256,HS256' } },
      "at '/config/DPOP_ALGORITHMS'",
    ],
    [
      // After the drain the gateway writes its audit spool for at least 3 s (src/gateway.ts,
      // AUDIT_FLUSH_MIN_MS), then closes Redis and the database: the kubelet must wait for it.
      'a termination grace that kills the audit flush',
      { terminationGracePeriodExtraSeconds: 3 },
      "at '/terminationGracePeriodExtraSeconds': minimum: got 3, want 4",
    ],
    [
      'a credential in the ConfigMap',
      { config: { DATABASE_URL: 'postgres://u:p@db/x' } },
      "additional properties 'DATABASE_URL' not allowed",
    ],
    [
      'a Secret key that is no credential setting',
      { secrets: { keys: ['PORT'] } },
      "at '/secrets/keys/0'",
    ],
    [
      'an Ingress for the admin listener',
      { adminIngress: { enabled: true } },
      "additional properties 'adminIngress' not allowed",
    ],
    [
      'an Ingress pointed at the admin port',
      { ingress: { enabled: true, servicePort: 8001 } },
      "additional properties 'servicePort' not allowed",
    ],
    [
      'an Ingress pointed at the admin Service',
      { ingress: { enabled: true, service: 'admin' } },
      "additional properties 'service' not allowed",
    ],
    [
      'an Ingress path with a backend of its own',
      {
        ingress: {
          enabled: true,
          hosts: [
            {
              host: 'admin.example.com',
              paths: [
                {
                  path: '/',
                  pathType: 'Prefix',
                  backend: { service: { name: 'rg-realmgate-admin', port: { name: 'admin' } } },
                },
              ],
            },
          ],
        },
      },
      "additional properties 'backend' not allowed",
    ],
    [
      'an Ingress host without a path',
      { ingress: { enabled: true, hosts: [{ host: 'api.example.com', paths: [] }] } },
      "at '/ingress/hosts/0/paths': minItems: got 0, want 1",
    ],
    [
      'the admin Service opened outside',
      { adminService: { type: 'LoadBalancer' } },
      "additional properties 'type' not allowed",
    ],
  ])('%s', (_, values, message) => {
    expect(refusal(values)).toContain(message);
  });

  it('and helm lint --strict, too', () => {
    const run = helm(
      'lint',
      '--strict',
      chart,
      ...valueArgs([valuesFile({ config: { PORT: '8000' } })]),
    );
    expect(run.status).not.toBe(0);
    expect(run.stdout + run.stderr).toContain("at '/config/PORT': got string, want integer");
  });

  it.each([
    [
      'a missing credential',
      {
        secrets: {
          keys: ['KEYCLOAK_ADMIN_PASSWORD', 'KEYCLOAK_CLIENT_SECRET', 'DATABASE_URL', 'REDIS_URL'],
        },
      },
      "at '/secrets/keys': no items match contains schema",
    ],
    [
      'keys without an existing Secret',
      { secrets: { existingSecret: '', values: { REDIS_URL: 'redis://r:6379' } } },
      "at '/secrets/keys': maxItems: got 5, want 0",
    ],
    [
      'no Keycloak',
      { config: { KEYCLOAK_URL: null } },
      "at '/config': missing property 'KEYCLOAK_URL'",
    ],
    // By the schema's pattern now, before the template's own check.
    ['an empty Keycloak URL', { config: { KEYCLOAK_URL: '' } }, "at '/config/KEYCLOAK_URL'"],
    // Kubernetes refuses an Ingress with neither rules nor a default backend.
    [
      'an Ingress without a host',
      { ingress: { enabled: true } },
      'ingress.enabled needs ingress.hosts',
    ],
    [
      'an autoscaler whose floor is above its ceiling',
      { autoscaling: { enabled: true, minReplicas: 4, maxReplicas: 3 } },
      'autoscaling.minReplicas (4) is above autoscaling.maxReplicas (3)',
    ],
    [
      'a ServiceMonitor without metrics',
      { serviceMonitor: { enabled: true }, config: { METRICS_ENABLED: false } },
      'serviceMonitor.enabled needs config.METRICS_ENABLED',
    ],
    [
      'a NetworkPolicy that does not say where PostgreSQL is',
      {
        networkPolicy: {
          enabled: true,
          adminFrom: { keycloak: [{ podSelector: {} }] },
          egress: { keycloak: { to: [{ podSelector: {} }] }, redis: { to: [{ podSelector: {} }] } },
        },
      },
      'networkPolicy.egress.postgresql.to: name where it runs',
    ],
    ...(['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] as const).map(
      (name): [string, unknown, string] => [
        `a NetworkPolicy that does not say where ${name} is`,
        {
          config: { [name]: 'http://otel-collector.monitoring.svc:4318' },
          networkPolicy: {
            enabled: true,
            adminFrom: { keycloak: [{ podSelector: {} }] },
            egress: Object.fromEntries(
              ['keycloak', 'postgresql', 'redis'].map((peer) => [
                peer,
                { to: [{ podSelector: {} }] },
              ]),
            ),
          },
        },
        'networkPolicy.egress.otlpCollector.to: name where the OpenTelemetry collector runs',
      ],
    ),
  ])('%s', (_, values, message) => {
    expect(refusal(values)).toContain(message);
  });

  it('while the examples and the defaults pass', () => {
    for (const files of [[], ...examples.map((file) => [file])]) {
      expect(helm('template', 'rg', chart, ...valueArgs(files)).status).toBe(0);
    }
  });
});
