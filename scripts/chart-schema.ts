import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { configSchema, FILE_SETTINGS } from '../src/config/config.ts';
import { ASYMMETRIC_ALGORITHMS } from '../src/config/jws-algorithms.ts';

/*
 * charts/realmgate/values.schema.json, generated (`npm run chart:schema`), so that helm refuses
 * a wrong value before anything is applied and the chart's settings cannot drift from the
 * gateway's: each entry of `config` is the JSON Schema of the setting of that name in
 * src/config/config.ts, its description included; `secrets` names only settings read from
 * `<NAME>_FILE`. test/unit/chart/chart-settings.test.ts fails when the committed file differs.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const VALUES_SCHEMA_FILE = path.join(root, 'charts/realmgate/values.schema.json');

type Setting = keyof typeof configSchema.shape;
type JsonSchema = Record<string, unknown>;

/**
 * The gateway's settings the chart does not expose under `config`, and why. Every other setting
 * is exposed, so a setting added to src/config reaches the chart's schema by itself.
 */
const NOT_IN_THE_CHART: Partial<Record<Setting, string>> = {
  HOST: 'the chart binds every interface of the pod, IPv6 and IPv4 (`::`)',
  ADMIN_HOST: 'the chart binds every interface of the pod, IPv6 and IPv4 (`::`)',
  KEYCLOAK_HTTP_PORT: 'the local Keycloak only; on Kubernetes, KEYCLOAK_URL',
  KEYCLOAK_MANAGEMENT_PORT: 'the local Keycloak only; on Kubernetes, KEYCLOAK_URL',
  DATA_DIR: 'nothing is written there with DATABASE_URL and KEYCLOAK_URL set',
  REALMGATE_DEMO: 'demo mode generates secrets and demo data: not for a cluster',
};

/** The settings under `config`, in the ConfigMap: all but those above and the credentials. */
export const CHART_SETTINGS: readonly Setting[] = (
  Object.keys(configSchema.shape) as Setting[]
).filter((name) => !(name in NOT_IN_THE_CHART) && !FILE_SETTINGS.includes(name));

/** Settings the templates read, so they must be set (the others may be null: the gateway's default). */
const NEEDED_BY_THE_CHART: readonly Setting[] = [
  'KEYCLOAK_URL',
  'PORT',
  'ADMIN_PORT',
  'SHUTDOWN_GRACE_SECONDS',
  'METRICS_ENABLED',
];

/** The credentials the chart mounts from its Secret; the ones the gateway needs on Kubernetes first. */
export const REQUIRED_SECRETS: readonly Setting[] = [
  'KEYCLOAK_ADMIN_PASSWORD',
  'KEYCLOAK_CLIENT_SECRET',
  'DATABASE_URL',
  'REDIS_URL',
  'REALMGATE_CACHE_SECRET',
];
/** Then the optional ones: the audit log's checkpoint keys, the same for every replica. */
export const CHART_SECRETS: readonly Setting[] = [
  ...REQUIRED_SECRETS,
  'OTEL_EXPORTER_OTLP_HEADERS',
  'AUDIT_SIGNING_KEY',
  'AUDIT_SIGNING_PREVIOUS_KEYS',
];

/*
 * What the gateway's parsing checks beyond JSON Schema's types, as patterns: helm asserts no
 * `format` (`uri` included), so without them a URL without its scheme passes helm and stops
 * every new replica at its start. An http(s) URL with a host (the gateway's `url`); KEYCLOAK_URL
 * one or more of them, comma-separated; DPOP_ALGORITHMS asymmetric algorithms' names.
 */
const HTTP_URL = String.raw`^https?://[^\s/?#]+(?:[/?#]\S*)?$`;
const KEYCLOAK_NODE = String.raw`https?://[^\s/?#,]+(?:[/?#][^\s,]*)?`;
const ALGORITHM = `(?:${ASYMMETRIC_ALGORITHMS.join('|')})`;
/*
 * TRUSTED_PROXIES: comma-separated addresses or CIDR ranges, each trimmed, empty ones skipped
 * (src/config/trusted-proxies.ts). The addresses are those Node's `isIP` takes (its own
 * expressions, an IPv6 zone included), the prefix at most 3 digits and within the family's bits.
 */
const V4_PART = String.raw`(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)`;
const V4 = String.raw`(?:${V4_PART}\.){3}${V4_PART}`;
const H = '[0-9a-fA-F]{1,4}';
const V6 =
  '(?:' +
  [
    `(?:${H}:){7}(?:${H}|:)`,
    `(?:${H}:){6}(?:${V4}|:${H}|:)`,
    `(?:${H}:){5}(?::${V4}|(?::${H}){1,2}|:)`,
    `(?:${H}:){4}(?:(?::${H}){0,1}:${V4}|(?::${H}){1,3}|:)`,
    `(?:${H}:){3}(?:(?::${H}){0,2}:${V4}|(?::${H}){1,4}|:)`,
    `(?:${H}:){2}(?:(?::${H}){0,3}:${V4}|(?::${H}){1,5}|:)`,
    `(?:${H}:){1}(?:(?::${H}){0,4}:${V4}|(?::${H}){1,6}|:)`,
    `(?::(?:(?::${H}){0,5}:${V4}|(?::${H}){1,7}|:))`,
  ].join('|') +
  ')(?:%[0-9a-zA-Z.:-]+)?';
const V4_BITS = String.raw`0?(?:[0-2]?\d|3[0-2])`;
const V6_BITS = String.raw`(?:0?0?\d|0?[1-9]\d|1[01]\d|12[0-8])`;
const PROXY = `(?:${V4}(?:/${V4_BITS})?|${V6}(?:/${V6_BITS})?)`;
const PATTERNS: Partial<Record<Setting, string>> = {
  KEYCLOAK_URL: String.raw`^\s*${KEYCLOAK_NODE}(?:\s*,\s*${KEYCLOAK_NODE})*\s*$`,
  DPOP_ALGORITHMS: String.raw`^[\s,]*${ALGORITHM}(?:[\s,]+${ALGORITHM})*[\s,]*$`,
  TRUSTED_PROXIES: String.raw`^\s*(?:${PROXY})?\s*(?:,\s*(?:${PROXY})?\s*)*$`,
};

/** The setting's JSON Schema as the gateway reads it (its input), for a values file. */
function settingSchema(name: Setting, nullable = !NEEDED_BY_THE_CHART.includes(name)): JsonSchema {
  const generated = z.toJSONSchema(configSchema.shape[name], {
    io: 'input',
    unrepresentable: 'any',
  }) as JsonSchema;
  // The description stays, first; defaults are values.yaml's (null: the gateway's own).
  const { description } = generated;
  const typed = { ...generated };
  for (const key of ['$schema', 'default', 'shownDefault', 'description']) delete typed[key];
  let schema: JsonSchema = typed;
  // A yes/no setting is a YAML boolean in values; the ConfigMap writes it as `true`/`false`.
  if (Array.isArray(typed.enum) && typed.enum.includes('true') && typed.enum.includes('false')) {
    schema = { type: 'boolean' };
  }
  const pattern = PATTERNS[name] ?? (typed.format === 'uri' ? HTTP_URL : undefined);
  if (pattern) schema = { ...schema, pattern };
  // A port the pod declares: 0 (any free port) cannot be one.
  if (name === 'PORT' || name === 'ADMIN_PORT') schema = { ...schema, minimum: 1 };
  if (nullable) schema = { anyOf: [schema, { type: 'null' }] };
  return { description, ...schema };
}

const port = { type: 'integer', minimum: 1, maximum: 65535 };
const count = (minimum: number) => ({ type: 'integer', minimum });
const strings = { type: 'object', additionalProperties: { type: 'string' } };
const objects = { type: 'array', items: { type: 'object' } };
const closed = (properties: Record<string, unknown>, extra: JsonSchema = {}): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  properties,
  ...extra,
});
const egressRule = (description: string) =>
  closed({ to: objects, ports: objects }, { description, required: ['to', 'ports'] });

export function chartValuesSchema(): JsonSchema {
  const config = Object.fromEntries(CHART_SETTINGS.map((name) => [name, settingSchema(name)]));
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $comment: 'Generated from scripts/chart-schema.ts (npm run chart:schema): do not edit.',
    ...closed(
      {
        replicaCount: count(1),
        image: closed(
          {
            repository: { type: 'string', minLength: 1 },
            tag: { type: 'string', description: "empty: the chart's appVersion" },
            pullPolicy: { enum: ['Always', 'IfNotPresent', 'Never'] },
          },
          { required: ['repository'] },
        ),
        imagePullSecrets: objects,
        nameOverride: { type: 'string' },
        fullnameOverride: { type: 'string' },
        config: closed(config, {
          description:
            "the gateway's settings (docs/configuration.md), without credentials; null: the gateway's default",
          required: [...NEEDED_BY_THE_CHART],
        }),
        secrets: closed(
          {
            existingSecret: { type: 'string' },
            keys: {
              type: 'array',
              uniqueItems: true,
              items: { enum: [...CHART_SECRETS] },
            },
            values: closed(
              Object.fromEntries(CHART_SECRETS.map((name) => [name, settingSchema(name, false)])),
            ),
          },
          {
            description:
              'credentials, only from a Secret, each mounted as the file its <NAME>_FILE setting names',
            // The Secret holds the required ones: an existing Secret lists them in `keys`, the
            // chart's has them in `values` (and then `keys` names nothing).
            if: { properties: { existingSecret: { const: '' } } },
            then: {
              properties: { values: { required: [...REQUIRED_SECRETS] }, keys: { maxItems: 0 } },
            },
            else: {
              properties: {
                keys: { allOf: REQUIRED_SECRETS.map((name) => ({ contains: { const: name } })) },
              },
            },
          },
        ),
        serviceAccount: closed({
          create: { type: 'boolean' },
          name: { type: 'string' },
          annotations: strings,
        }),
        podAnnotations: strings,
        podLabels: strings,
        service: closed({
          type: { enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] },
          port,
          annotations: strings,
        }),
        adminService: closed(
          { port, annotations: strings },
          { description: 'the admin listener: a ClusterIP Service, never on an Ingress' },
        ),
        ingress: closed(
          {
            enabled: { type: 'boolean' },
            className: { type: 'string' },
            annotations: strings,
            hosts: {
              type: 'array',
              items: closed(
                {
                  host: { type: 'string' },
                  paths: {
                    type: 'array',
                    minItems: 1,
                    items: closed(
                      {
                        path: { type: 'string', pattern: '^/' },
                        pathType: { enum: ['Prefix', 'Exact', 'ImplementationSpecific'] },
                      },
                      { required: ['path', 'pathType'] },
                    ),
                  },
                },
                { required: ['host', 'paths'] },
              ),
            },
            tls: objects,
          },
          {
            description:
              'the public listener only: no key names a Service or port, so the admin listener cannot be put on it',
          },
        ),
        resources: { type: 'object' },
        startupSeconds: {
          ...count(10),
          description:
            "seconds a new replica may take to listen, the database's migration included (the startup probe's budget)",
        },
        preStopSeconds: {
          ...count(0),
          description:
            'seconds of a pre-stop pause before SIGTERM, so that Services and the ingress controller stop sending first; 0: no pre-stop hook',
        },
        // After the drain the gateway writes its audit spool (at least 3 s, AUDIT_FLUSH_MIN_MS in
        // src/gateway.ts) and closes Redis and the database: the kubelet waits for that too.
        terminationGracePeriodExtraSeconds: {
          ...count(4),
          description:
            'seconds the kubelet waits beyond preStopSeconds + SHUTDOWN_GRACE_SECONDS: the audit spool written after the drain (3 s at least) and the connections closed',
        },
        topologySpread: closed({
          enabled: { type: 'boolean' },
          maxSkew: count(1),
          whenUnsatisfiable: { enum: ['ScheduleAnyway', 'DoNotSchedule'] },
        }),
        nodeSelector: strings,
        tolerations: objects,
        affinity: { type: 'object' },
        priorityClassName: { type: 'string' },
        podDisruptionBudget: closed({
          enabled: { type: 'boolean' },
          maxUnavailable: count(1),
        }),
        autoscaling: closed({
          enabled: { type: 'boolean' },
          minReplicas: count(1),
          maxReplicas: count(1),
          targetCPUUtilizationPercentage: { type: 'integer', minimum: 1, maximum: 100 },
        }),
        serviceMonitor: closed({
          enabled: { type: 'boolean' },
          interval: { type: 'string', pattern: '^[0-9]+(ms|s|m|h)$' },
          labels: strings,
        }),
        prometheusRule: closed({ enabled: { type: 'boolean' }, labels: strings }),
        networkPolicy: closed({
          enabled: { type: 'boolean' },
          publicFrom: {
            ...objects,
            description: 'who may reach the public port (NetworkPolicyPeer objects); empty: anyone',
          },
          adminFrom: closed(
            { namespace: { type: 'boolean' }, keycloak: objects, extra: objects },
            {
              description:
                'who may reach the admin port: every pod of this namespace while namespace is true, Keycloak, and extra (NetworkPolicyPeer objects)',
            },
          ),
          egress: closed({
            keycloak: egressRule('where Keycloak runs'),
            postgresql: egressRule('where the platform database runs'),
            redis: egressRule('where Redis runs'),
            automationUpstream: egressRule('where AUTOMATION_UPSTREAM_URL runs, when set'),
            otlpCollector: egressRule(
              'where the OpenTelemetry collector runs, when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set',
            ),
            dns: egressRule('the cluster DNS'),
            extra: objects,
          }),
        }),
        tests: closed({ enabled: { type: 'boolean' } }),
      },
      { required: ['image', 'config', 'secrets'] },
    ),
  };
}

/** The file's text: what `npm run chart:schema` writes and the test compares. */
export const valuesSchemaText = () => `${JSON.stringify(chartValuesSchema(), null, 2)}\n`;

/*
 * charts/realmgate/files/gateway-defaults.json, generated too: the gateway's defaults of the
 * settings the templates check across settings as loadConfig does (templates/_helpers.tpl),
 * which a null in values leaves to the gateway.
 */
export const GATEWAY_DEFAULTS_FILE = path.join(
  root,
  'charts/realmgate/files/gateway-defaults.json',
);
const DEFAULTS_IN_THE_CHART: readonly Setting[] = [
  'AUDIT_RETENTION_DAYS',
  'AUDIT_RETENTION_MIN_DAYS',
  'AUDIT_RETENTION_MAX_DAYS',
];
export const gatewayDefaultsText = () =>
  `${JSON.stringify(
    {
      $comment:
        'Generated from src/config by scripts/chart-schema.ts (npm run chart:schema): do not edit.',
      ...Object.fromEntries(
        DEFAULTS_IN_THE_CHART.map((name) => [name, configSchema.shape[name].parse(undefined)]),
      ),
    },
    null,
    2,
  )}\n`;

if (import.meta.url === `file://${process.argv[1]}`) {
  // FILE_SETTINGS is the gateway's list of credentials: the chart's Secret takes only those.
  const strays = CHART_SECRETS.filter((name) => !FILE_SETTINGS.includes(name));
  if (strays.length > 0) throw new Error(`not read from <NAME>_FILE: ${strays.join(', ')}`);
  writeFileSync(VALUES_SCHEMA_FILE, valuesSchemaText());
  writeFileSync(GATEWAY_DEFAULTS_FILE, gatewayDefaultsText());
  for (const file of [VALUES_SCHEMA_FILE, GATEWAY_DEFAULTS_FILE])
    console.log(`${path.relative(root, file)} written`);
}
