import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  PrometheusRule,
  ServiceMonitor,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IIngress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPod } from 'kubernetes-models/v1/Pod';
import type { IService } from 'kubernetes-models/v1/Service';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { FILE_SETTINGS } from '../../../src/config/config.ts';
import { DATABASE_POOL_SIZE } from '../../../src/db/pool-size.ts';
import { VERSION } from '../../../src/release/version.ts';
import {
  chart,
  examples,
  helm,
  NAMESPACE,
  ofKind,
  render,
  valueArgs,
  type K8sObject,
} from '../../helpers/helm-chart.ts';

/*
 * The chart as real helm renders it, over its default values and each example values file:
 * linted, every object checked against the Kubernetes schemas (kubernetes-models, Kubernetes
 * 1.36; the Prometheus Operator's for ServiceMonitor and PrometheusRule), and what matters
 * checked on the objects themselves.
 */

/** The schema of each kind the chart may render; a kind without one fails the test. */
const MODELS: Record<string, { new (data: never): { validate(): void } }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Pod': Pod,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

const cases: Array<[string, string[]]> = [
  ['the default values', []],
  ...examples.map((file): [string, string[]] => [`examples/${path.basename(file)}`, [file]]),
];

/** The secret values a values file gives the chart's Secret. */
function secretValuesOf(files: string[]): string[] {
  return files.flatMap((file) => {
    const values = parse(readFileSync(file, 'utf8')) as { secrets?: { values?: object } };
    return Object.values(values.secrets?.values ?? {}) as string[];
  });
}

/*
 * The platform database's connections the gateway's fleet may take (docs/kubernetes.md,
 * "PostgreSQL's connections"): of PostgreSQL's default max_connections 100, 3 are reserved for
 * superusers, and 17 are left to psql, backups, monitoring and the operator's own sessions.
 */
const DATABASE_CONNECTION_BUDGET = 80;
/** A replica migrating at start: a pool of 2 of its own beside its usual one (src/db/database.ts). */
const MIGRATION_POOL_SIZE = 2;

const gatewayOf = (objects: K8sObject[]) => {
  const [deployment] = ofKind<IDeployment>(objects, 'Deployment');
  const container = deployment!.spec!.template.spec!.containers.find((c) => c.name === 'gateway');
  return { deployment: deployment!, container: container! };
};

it('has an example whose Secret the chart makes, so that its values are looked for elsewhere', () => {
  const values = examples.flatMap((file) => secretValuesOf([file]));
  expect(values.length).toBeGreaterThanOrEqual(5);
});

it('refuses an object the Kubernetes schemas refuse (the check is not vacuous)', () => {
  const [deployment] = ofKind<IDeployment>(render([]), 'Deployment');
  const broken = structuredClone(deployment!) as { spec: { replicas: unknown } };
  broken.spec.replicas = 'two';
  expect(() => new Deployment(broken as never).validate()).toThrow(/replicas/);
});

it('lets the gateway reach the OpenTelemetry collector through its NetworkPolicy', () => {
  const collector = { namespaceSelector: { matchLabels: { name: 'monitoring' } } };
  const operators = examples.find((file) => file.endsWith('operators.yaml'))!;
  const objects = render(
    [operators],
    [
      'config.OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector.monitoring.svc:4318',
      'config.AUDIT_OTEL_LOGS=true',
      'networkPolicy.egress.otlpCollector.to[0].namespaceSelector.matchLabels.name=monitoring',
    ],
  );
  const [policy] = ofKind<INetworkPolicy>(objects, 'NetworkPolicy');
  expect(policy!.spec!.egress).toContainEqual({
    to: [collector],
    ports: [{ port: 4318, protocol: 'TCP' }],
  });
});

it('opens the public port to whom publicFrom names, and the admin port to the namespace only when asked', () => {
  const operators = examples.find((file) => file.endsWith('operators.yaml'))!;
  const ingressOf = (sets: string[]) =>
    ofKind<INetworkPolicy>(render([operators], sets), 'NetworkPolicy')[0]!.spec!.ingress!;
  const controller = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
  };
  const [onlyController, adminAlone] = ingressOf([]);
  expect(onlyController!.from).toEqual([controller]);
  expect(onlyController!.ports).toEqual([{ port: 'http', protocol: 'TCP' }]);
  expect(adminAlone!.from).not.toContainEqual({ podSelector: {} });
  expect(adminAlone!.from!.length).toBeGreaterThan(0);
  // The chart's defaults: the public port from anyone, the admin port from the namespace too.
  const [fromAnyone, adminOfNamespace] = ingressOf([
    'networkPolicy.publicFrom=null',
    'networkPolicy.adminFrom.namespace=true',
  ]);
  expect(fromAnyone!.from).toBeUndefined();
  expect(adminOfNamespace!.from).toContainEqual({ podSelector: {} });
});

it.each([
  [[], 300],
  [['startupSeconds=1800'], 1800],
  [['startupSeconds=62'], 62],
])('gives a replica startupSeconds to migrate the database and listen (%j)', (sets, seconds) => {
  const { container } = gatewayOf(render([], sets));
  const probe = container.startupProbe!;
  // At least the budget, and not a whole period more.
  const budget = probe.periodSeconds! * probe.failureThreshold!;
  expect(budget).toBeGreaterThanOrEqual(seconds);
  expect(budget).toBeLessThan(seconds + probe.periodSeconds!);
});

// Chart.yaml's kubeVersion admits Kubernetes 1.30 to 1.32, whose API server refuses a
// zero-second sleep (allowed from 1.33): no pause is no hook.
it('renders no pre-stop hook with preStopSeconds=0, and the pause with 1', () => {
  const none = gatewayOf(render([], ['preStopSeconds=0']));
  expect(none.container.lifecycle?.preStop).toBeUndefined();
  const one = gatewayOf(render([], ['preStopSeconds=1']));
  expect(one.container.lifecycle!.preStop).toEqual({ sleep: { seconds: 1 } });
});

describe.each(cases)('the chart over %s', (_, files) => {
  const objects = render(files);
  const configMap = ofKind<IConfigMap>(objects, 'ConfigMap')[0]!.data!;
  const { deployment, container } = gatewayOf(objects);
  const pod = deployment.spec!.template.spec!;

  it('passes helm lint --strict', () => {
    const run = helm('lint', '--strict', chart, ...valueArgs(files));
    expect(run.stderr + run.stdout).toContain('0 chart(s) failed');
    expect(run.status).toBe(0);
  });

  it('renders only objects valid by the Kubernetes schemas', () => {
    expect(objects.length).toBeGreaterThanOrEqual(6);
    for (const object of objects) {
      const Model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect(Model, `${object.apiVersion} ${object.kind} has a schema here`).toBeDefined();
      expect(() => new Model!(object as never).validate(), object.metadata.name).not.toThrow();
    }
  });

  it('puts only the public listener on an Ingress; the admin Service stays inside', () => {
    const services = ofKind<IService>(objects, 'Service');
    const publicService = services.find((s) => s.spec!.ports![0]!.targetPort === 'http')!;
    const admin = services.find((s) => s.spec!.ports![0]!.targetPort === 'admin')!;
    expect(admin.spec!.type).toBe('ClusterIP');
    // Keycloak posts its logout tokens to the admin Service unless told another address.
    expect(configMap.BACKCHANNEL_LOGOUT_URL).toBe(
      `http://${admin.metadata!.name}.${NAMESPACE}.svc:${admin.spec!.ports![0]!.port}/backchannel-logout`,
    );
    expect(admin.spec!.ports).toHaveLength(1);
    expect(publicService.spec!.ports).toHaveLength(1);
    for (const ingress of ofKind<IIngress>(objects, 'Ingress')) {
      const backends = ingress.spec!.rules!.flatMap((rule) =>
        rule.http!.paths.map((p) => p.backend.service!),
      );
      expect(backends.length).toBeGreaterThan(0);
      for (const backend of backends) {
        expect(backend).toEqual({ name: publicService.metadata!.name, port: { name: 'http' } });
      }
      expect(ingress.spec!.defaultBackend).toBeUndefined();
    }
  });

  it('keeps every credential out of the ConfigMap and the environment: files of the Secret', () => {
    const secretNames = new Set<string>(FILE_SETTINGS);
    expect(Object.keys(configMap).filter((name) => secretNames.has(name))).toEqual([]);
    for (const c of [
      ...pod.containers,
      ...ofKind<IPod>(objects, 'Pod').flatMap((p) => p.spec!.containers),
    ]) {
      for (const variable of c.env ?? []) {
        expect(secretNames.has(variable.name), variable.name).toBe(false);
        expect(variable.valueFrom, variable.name).toBeUndefined();
      }
    }
    const fileVariables = (container.env ?? []).filter((v) => v.name.endsWith('_FILE'));
    expect(fileVariables.map((v) => v.name.slice(0, -5))).toEqual(
      expect.arrayContaining([
        'DATABASE_URL',
        'KEYCLOAK_ADMIN_PASSWORD',
        'KEYCLOAK_CLIENT_SECRET',
        'REALMGATE_CACHE_SECRET',
        'REDIS_URL',
      ]),
    );
    const mount = container.volumeMounts!.find((m) => m.name === 'secrets')!;
    for (const variable of fileVariables) {
      expect(variable.value).toBe(`${mount.mountPath}/${variable.name.slice(0, -5)}`);
    }
    // Whatever the values file gives the chart's Secret appears nowhere else.
    const outsideSecrets = JSON.stringify(objects.filter((o) => o.kind !== 'Secret'));
    for (const value of secretValuesOf(files)) expect(outsideSecrets).not.toContain(value);
  });

  it('probes the routes the gateway serves on its listener, and drains within the grace period', () => {
    const port = container.ports!.find((p) => p.name === 'http')!;
    expect(String(port.containerPort)).toBe(configMap.PORT);
    const probes = [container.startupProbe, container.livenessProbe, container.readinessProbe];
    expect(probes.map((p) => [p?.httpGet?.path, p?.httpGet?.port])).toEqual([
      ['/healthz', 'http'],
      ['/healthz', 'http'],
      ['/readyz', 'http'],
    ]);
    const preStop = container.lifecycle!.preStop!.sleep!.seconds;
    const drain = Number(configMap.SHUTDOWN_GRACE_SECONDS);
    expect(drain).toBeGreaterThan(0);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + drain);
  });

  it('runs the image of this release, non-root, read-only, without capabilities or a token', () => {
    expect(container.image).toMatch(new RegExp(`:${VERSION.replaceAll('.', '\\.')}$`));
    expect(deployment.spec!.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    });
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const hardened = (c: IContainer) =>
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
    hardened(container);
    ofKind<IPod>(objects, 'Pod').forEach((p) => p.spec!.containers.forEach(hardened));
    expect(container.resources?.requests).toBeDefined();
    expect(pod.topologySpreadConstraints!.map((t) => t.topologyKey)).toEqual([
      'kubernetes.io/hostname',
      'topology.kubernetes.io/zone',
    ]);
  });

  it("selects the gateway's pods only: never the helm test pod", () => {
    const selectors: Array<[string, Record<string, string>]> = [
      ...ofKind<IService>(objects, 'Service').map((s): [string, Record<string, string>] => [
        `Service ${s.metadata!.name}`,
        s.spec!.selector!,
      ]),
      ...objects
        .filter((o) => ['PodDisruptionBudget', 'Deployment'].includes(o.kind))
        .map((o): [string, Record<string, string>] => [
          o.kind,
          (o.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels,
        ]),
      ...objects
        .filter((o) => o.kind === 'NetworkPolicy')
        .map((o): [string, Record<string, string>] => [
          o.kind,
          (o.spec as { podSelector: { matchLabels: Record<string, string> } }).podSelector
            .matchLabels,
        ]),
      ...pod.topologySpreadConstraints!.map((t): [string, Record<string, string>] => [
        `spread over ${t.topologyKey}`,
        t.labelSelector!.matchLabels!,
      ]),
    ];
    const selects = (labels: Record<string, string>, selector: Record<string, string>) =>
      Object.entries(selector).every(([key, value]) => labels[key] === value);
    const gatewayLabels = deployment.spec!.template.metadata!.labels!;
    const testLabels = ofKind<IPod>(objects, 'Pod')[0]!.metadata!.labels!;
    for (const [what, selector] of selectors) {
      expect(selects(gatewayLabels, selector), what).toBe(true);
      expect(selects(testLabels, selector), what).toBe(false);
    }
  });

  it("keeps the fleet at its largest within the database's connection budget", () => {
    // The autoscaler's maximum, else the Deployment's replicas; one more during a rolling update.
    const [hpa] = ofKind<IHorizontalPodAutoscaler>(objects, 'HorizontalPodAutoscaler');
    const replicas = hpa ? hpa.spec.maxReplicas : deployment.spec!.replicas!;
    const surge = Number(deployment.spec!.strategy!.rollingUpdate!.maxSurge);
    const workers = Number(configMap.WORKERS);
    expect(Number.isInteger(workers) && workers > 0, `WORKERS ${configMap.WORKERS}`).toBe(true);
    const connections = (replicas + surge) * workers * DATABASE_POOL_SIZE + MIGRATION_POOL_SIZE;
    expect(
      connections,
      `${replicas} + ${surge} replicas of ${workers} worker(s)`,
    ).toBeLessThanOrEqual(DATABASE_CONNECTION_BUDGET);
  });

  it('has a helm test that checks readiness and an envelope answer through the public Service', () => {
    const [test] = ofKind<IPod>(objects, 'Pod');
    expect(test!.metadata!.annotations!['helm.sh/hook']).toBe('test');
    expect(test!.spec!.containers[0]!.image).toBe(container.image);
    const script = test!.spec!.containers[0]!.command!.join(' ');
    expect(script).toContain("check('/readyz', 200)");
    expect(script).toMatch(/\['data', 'message', 'result', 'ts'\]/);
  });
});
