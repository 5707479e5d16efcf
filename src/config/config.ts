import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { parsePostgresUrl } from '../../keycloak/postgres-url.ts';
import { DATABASE_POOL_SIZE } from '../db/pool-size.ts';
import { parseTrustedProxies } from './trusted-proxies.ts';
import { ed25519PrivateKeyOf, ed25519PublicKeysOf } from './ed25519-keys.ts';
import { fileVariableOf, resolveSettingFiles } from './setting-files.ts';
import { ASYMMETRIC_ALGORITHMS, type AsymmetricAlgorithm } from './jws-algorithms.ts';

/**
 * Settings that can carry a credential (a password, a key, a connection string with a
 * password): each may also be read from the file `<NAME>_FILE` names, as Docker and Kubernetes
 * hand secrets over. Marked on the schema entry with `fromFile`; `FILE_SETTINGS` lists them.
 */
const fileSettings = z.registry<{ fromFile: true }>();
const fromFile = <T extends z.ZodType>(schema: T): T => {
  fileSettings.add(schema, { fromFile: true });
  return schema;
};

/** Secrets must be long enough to resist guessing; demo mode generates them instead. */
const secret = z.string().min(16, 'must be at least 16 characters');

const boolFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const url = z
  .url()
  .refine((v) => /^https?:\/\//.test(v), 'must be an http(s) URL')
  .transform((v) => v.replace(/\/+$/, ''));

const port = z.coerce.number().int().min(0).max(65535);

/** A PEM setting `parse` accepts; its message never repeats the value (a private key). */
const pemOf = (parse: (pem: string) => unknown) =>
  z.string().superRefine((value, ctx) => {
    try {
      parse(value);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  });

/** More nodes than this is not a Keycloak cluster the gateway should spread calls over. */
const MAX_KEYCLOAK_NODES = 16;

/**
 * `KEYCLOAK_URL`: one URL, or the nodes of one Keycloak cluster separated by commas. Each entry
 * is trimmed and must be an http(s) URL; none may repeat another. Problems name entries by
 * position, never by value (a URL may hold credentials).
 */
const isAsymmetric = (name: string): name is AsymmetricAlgorithm =>
  (ASYMMETRIC_ALGORITHMS as readonly string[]).includes(name);

const keycloakUrls = z.string().transform((value, ctx) => {
  const entries = value.split(',').map((entry) => entry.trim());
  if (entries.length > MAX_KEYCLOAK_NODES) {
    ctx.addIssue({ code: 'custom', message: `at most ${MAX_KEYCLOAK_NODES} URLs` });
    return z.NEVER;
  }
  const urls: string[] = [];
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    const where = entries.length > 1 ? `entry ${i + 1}: ` : '';
    const parsed = url.safeParse(entry);
    if (!parsed.success) {
      ctx.addIssue({ code: 'custom', message: `${where}${parsed.error.issues[0]!.message}` });
      return;
    }
    const canonical = new URL(parsed.data).href.replace(/\/+$/, '');
    if (seen.has(canonical)) {
      ctx.addIssue({ code: 'custom', message: `${where}repeats an earlier URL` });
      return;
    }
    seen.add(canonical);
    urls.push(parsed.data);
  });
  return urls;
});

/**
 * `REDIS_URL` as ioredis reads it without surprise: a `redis:`/`rediss:` URL naming a host (and
 * at most a database number), or a Unix socket's absolute path. ioredis takes anything else
 * for something (`http://redis:6379` becomes the socket `//redis:6379`), and the gateway would
 * run degraded, its replicas sharing nothing, or it throws at start with the URL, password
 * included, in the error it logs. The message never repeats the value.
 */
const redisUrl = z
  .string()
  .min(1)
  .refine((value) => {
    if (value.startsWith('/')) return true;
    if (!URL.canParse(value)) return false;
    const { protocol, hostname, pathname } = new URL(value);
    return (
      (protocol === 'redis:' || protocol === 'rediss:') &&
      hostname !== '' &&
      /^(\/[0-9]*)?$/.test(pathname)
    );
  }, 'must be redis://[user:password@]host[:port][/database] (rediss:// with TLS), or the absolute path of a Unix socket');

/**
 * `DATABASE_URL` as pg reads it: a `postgres:`/`postgresql:` URL, its escapes valid, no blank
 * around it; or a Unix socket directory's absolute path (then a space and the database). pg
 * reads anything else as something: libpq's `host=db user=app` is the database of that name
 * on the host `base`, `db:5432/app` the database `432/app` on localhost; a bad port or escape
 * throws at the first query with the URL, password included, in its error. The message never
 * repeats the value.
 */
const databaseUrl = z
  .string()
  .min(1)
  .refine((value) => {
    if (value.startsWith('/')) return true;
    if (value.trim() !== value) return false;
    const direct = URL.parse(value);
    // pg reads `user@/database?host=/socket/dir` too: no host in the URL, the host an option.
    const url = direct ?? URL.parse(value.replace('@/', '@socket/'));
    if (url?.protocol !== 'postgres:' && url?.protocol !== 'postgresql:') return false;
    try {
      decodeURIComponent(url.username);
      decodeURIComponent(url.password);
    } catch {
      return false;
    }
    // No host at all (`postgres:///app`): pg takes PGHOST's, or localhost.
    return direct !== null || Boolean(url.searchParams.get('host'));
  }, 'must be postgres://[user:password@]host[:port]/database[?options] (postgresql:// alike), or the absolute path of a Unix socket directory');

/**
 * `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs separated by commas, values percent-encoded
 * (OpenTelemetry's format). Problems name entries by position, never by value (they are often
 * API keys).
 */
const otlpHeaders = z.string().transform((value, ctx) => {
  const headers: Record<string, string> = {};
  value.split(',').forEach((entry, i) => {
    const at = entry.indexOf('=');
    const name = entry.slice(0, at).trim();
    let decoded: string | undefined;
    try {
      decoded = decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      decoded = undefined;
    }
    if (at < 1 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || decoded === undefined) {
      ctx.addIssue({ code: 'custom', message: `entry ${i + 1} is not name=value` });
      return;
    }
    headers[name] = decoded;
  });
  return headers;
});

/**
 * Every variable realmgate reads, with its default and, in `.meta()`, what it means: the
 * configuration reference in docs/configuration.md is generated from this (`npm run
 * docs:config`; see config-reference.ts). `description` is Markdown, its links relative to
 * docs/; `shownDefault`, where the default value does not say it, what holds when the setting
 * is unset. `.meta()` comes last in each chain (inside `fromFile`): each zod method returns a
 * new schema, which would not carry it.
 * `.env.example` documents the same list; a unit test keeps the two in step.
 */
export const configSchema = z.object({
  HOST: z.string().min(1).default('0.0.0.0').meta({
    description:
      "address of the public listener (`{base_url}`): `/api/...` and `/auth/...`, Keycloak's admin console refused. `0.0.0.0`: every IPv4 interface; `::`: every interface, IPv6 and IPv4 (IPv4 alone on a kernel without IPv6)",
  }),
  PORT: port.default(8000).meta({ description: 'port of the public listener' }),
  ADMIN_HOST: z.string().min(1).default('127.0.0.1').meta({
    description:
      'address of the admin listener (`{admin_site_address}`): the same API plus `/auth/admin/` (the Keycloak console) and `GET /metrics`',
  }),
  ADMIN_PORT: port.default(8001).meta({ description: 'port of the admin listener' }),
  PUBLIC_URL: url.default('http://localhost:8000').meta({
    description:
      '`{base_url}` as clients reach it; token `iss` is `PUBLIC_URL/auth/realms/<realm>`',
  }),
  ADMIN_PUBLIC_URL: url.default('http://localhost:8001').meta({
    description: "`{admin_site_address}` as clients reach it; the console's address",
  }),
  BACKCHANNEL_LOGOUT_URL: url.optional().meta({
    description:
      "where Keycloak posts its logout tokens (OpenID Connect back-channel logout): the admin listener's `/backchannel-logout` as Keycloak reaches it. Set on every realm's API client and `realmgate-gateway` client at start and on new realms, so that a session ended in Keycloak ends at the gateway at once (see [what ends access](security-model.md#what-ends-access-and-how-the-gateway-learns-it))",
    shownDefault:
      '`http://<ADMIN_HOST>:<ADMIN_PORT>/backchannel-logout` (`127.0.0.1` for `0.0.0.0`)',
  }),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .meta({
      description: 'pino level: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
    }),

  /** Parsed into the list of its nodes (one or more). */
  KEYCLOAK_URL: keycloakUrls.optional().meta({
    description:
      'external Keycloak including its relative path, e.g. `http://kc:8080/auth`; or the nodes of one Keycloak cluster, comma-separated, called round robin over those that answer (see [Keycloak on PostgreSQL, and as a cluster](running.md#keycloak-on-postgresql-and-as-a-cluster)); unset, realmgate fetches, builds and starts a local Keycloak (Java 17+ and Maven)',
    shownDefault: '(local Keycloak)',
  }),
  KEYCLOAK_HTTP_PORT: port.default(8080).meta({
    description: 'HTTP port of the local Keycloak (only when `KEYCLOAK_URL` is unset)',
  }),
  KEYCLOAK_MANAGEMENT_PORT: port.default(9000).meta({
    description: 'management port of the local Keycloak (only when `KEYCLOAK_URL` is unset)',
  }),
  KEYCLOAK_DB_URL: fromFile(
    z
      .string()
      .superRefine((value, ctx) => {
        try {
          parsePostgresUrl(value);
        } catch (err) {
          // The parser's messages never repeat the URL, which may hold a password.
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
        }
      })
      .optional()
      .meta({
        description:
          'PostgreSQL database of the local Keycloak, `postgres://user:pass@host/db` (the database must exist; Keycloak creates its tables); the password reaches Keycloak through its environment, never its command line',
        shownDefault: '(embedded H2 in `DATA_DIR`)',
      }),
  ),
  KEYCLOAK_ADMIN_USERNAME: z.string().min(1).default('admin').meta({
    description:
      "Keycloak's bootstrap administrator (master realm): created on a local Keycloak's first start, used for provisioning",
  }),
  KEYCLOAK_ADMIN_PASSWORD: fromFile(
    secret.optional().meta({ description: 'its password, 16+ characters' }),
  ),
  KEYCLOAK_CLIENT_SECRET: fromFile(
    secret.optional().meta({
      description:
        "secret of the gateway's confidential client `realmgate-gateway`, present in every realm for the gateway's admin-API calls; 16+ characters",
    }),
  ),
  KEYCLOAK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60000).default(5000).meta({
    description:
      "timeout of the gateway's own Keycloak calls but its password grants (key sets, introspection, admin API); a call without an answer this long has its node probed, and a node that does not answer its probe either is down",
  }),
  AUTH_PROXY_TIMEOUT_MS: z.coerce.number().int().min(100).max(300000).default(30000).meta({
    description:
      'timeout of proxied `/auth/` requests and of every password grant, whichever way it came (`/auth` or a Basic login): Keycloak hashes the password, and a burst of logins queues behind the hashing. After a Basic re-check timed out, logins of that realm kept for an outage are served without a grant for as long again',
  }),
  PROXY_ANSWER_DEADLINE_SECONDS: z.coerce.number().int().min(1).max(86400).default(300).meta({
    description:
      "longest a proxied answer (the automation route, `/auth/`) may go on once it lasts (from its second chunk, or the first time the client holds it back: an answer that comes whole at once starts no timer) to its last byte, however steadily it comes (`AUTH_PROXY_TIMEOUT_MS` bounds each silence within it), the client's slow reading included: past it the upstream's request is closed and the client gets 504, or, its answer begun, its connection cut; raise it for large downloads to slow clients. Also how long an audit log export or download may wait for its client in all (its waits for the client to take more added up, however little it takes each time): past it the answer is cut and its slot (`AUDIT_EXPORT_CONCURRENCY`) given back",
  }),
  SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(0).max(300).default(10).meta({
    description:
      'on SIGTERM/SIGINT, how long requests in flight may finish before their connections are closed (`/readyz` answers 503 and the listeners stop accepting at once; a second signal exits at once)',
  }),
  WORKERS: z
    .string()
    .regex(/^(auto|[1-9][0-9]{0,2})$/, 'must be auto or a whole number from 1 to 999')
    .default('auto')
    .transform((value) => (value === 'auto' ? availableParallelism() : Number(value)))
    .meta({
      description:
        'worker processes sharing the listeners, each running the whole gateway under one supervising process that restarts a worker that dies; `auto`: one per core (`os.availableParallelism()`); one process without `DATABASE_URL`, whatever this says (see "Workers: every core" in [production topology](production-topology.md))',
    }),
  METRICS_ENABLED: boolFlag.default(true).meta({
    description:
      'Prometheus metrics at `GET /metrics` on the admin listener (never the public one); `false`: nothing is counted',
  }),
  // OpenTelemetry tracing, under OpenTelemetry's own names.
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url.optional().meta({
    description:
      'OTLP/HTTP traces endpoint, used as is; setting it or `OTEL_EXPORTER_OTLP_ENDPOINT` turns tracing on (see "Tracing" in [operations](operations.md))',
    shownDefault: '(tracing off)',
  }),
  OTEL_EXPORTER_OTLP_ENDPOINT: url.optional().meta({
    description:
      'OTLP/HTTP base endpoint, `/v1/traces` appended; used when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is unset',
    shownDefault: '(tracing off)',
  }),
  OTEL_EXPORTER_OTLP_HEADERS: fromFile(
    otlpHeaders.optional().meta({
      description:
        'headers of each export (e.g. an API key), `name=value` pairs separated by commas, values percent-encoded',
      shownDefault: '(none)',
    }),
  ),
  OTEL_SERVICE_NAME: z
    .string()
    .min(1)
    .default('realmgate')
    .meta({ description: 'the service name spans carry' }),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(1).meta({
    description:
      "share of traces kept, 0 to 1: a new trace decided on its trace id, a client's continued one per request at random (its `traceparent`, trace id included, cannot raise it)",
  }),

  TOKEN_CLOCK_LEEWAY_SECONDS: z.coerce.number().int().min(0).max(300).default(10).meta({
    description: "clock skew tolerated on a token's `exp`, `nbf` and `iat`",
  }),
  DPOP_ALGORITHMS: z
    .string()
    .transform((value, ctx) => {
      const names = value.split(/[\s,]+/).filter((name) => name !== '');
      const unknown = names.filter((name) => !isAsymmetric(name));
      if (names.length === 0 || unknown.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `expected asymmetric JWS algorithms among ${ASYMMETRIC_ALGORITHMS.join(', ')}${unknown.length > 0 ? `; not ${unknown.join(', ')}` : ''}`,
        });
        return z.NEVER;
      }
      return [...new Set(names)] as AsymmetricAlgorithm[];
    })
    .default([...ASYMMETRIC_ALGORITHMS])
    .meta({
      description:
        "algorithms a DPoP proof may be signed with, separated by commas or spaces; asymmetric only (the default: every one Keycloak offers); a challenge's `algs`",
      shownDefault: ASYMMETRIC_ALGORITHMS.join(','),
    }),
  DPOP_PROOF_MAX_AGE_SECONDS: z.coerce.number().int().min(5).max(600).default(60).meta({
    description:
      "how old a DPoP proof's `iat` may be; its `jti` is remembered (in Redis: across replicas) as long and twice `DPOP_PROOF_AHEAD_SECONDS` more from its first use (its `iat` may be that far ahead, and a replica whose clock is behind still takes it so much longer), so each proof is accepted once",
  }),
  DPOP_PROOF_AHEAD_SECONDS: z.coerce.number().int().min(0).max(60).default(5).meta({
    description:
      "how far ahead of the gateway's clock a DPoP proof's `iat` may be (a client whose clock runs ahead)",
  }),
  DPOP_NONCE: boolFlag.default(false).meta({
    description:
      "server nonces (RFC 9449 section 9): every DPoP proof on `/api` must carry the gateway's current nonce, else 401 `use_dpop_nonce` with a `DPoP-Nonce` header giving it; a nonce is the HMAC of a time slot of `DPOP_PROOF_MAX_AGE_SECONDS` under a key derived (HKDF) from `REALMGATE_CACHE_SECRET`, which it then requires (but in demo mode), so replicas need nothing shared at run time, and the previous slot's is still accepted",
  }),
  BASIC_CACHE_MAX_SECONDS: z.coerce.number().int().min(0).max(3600).default(60).meta({
    description:
      'longest time a Basic login is reused from the cache, never longer than its token lives: a changed password or a disabled user takes effect within it (0: no cache); sooner when the gateway sees the change: at once made through it, within `AUDIT_KEYCLOAK_EVENTS_SECONDS` + 5 s and the time a pull round takes, made in Keycloak directly (seen in its events, which the gateway pulls whether the audit log is on or off)',
  }),
  BASIC_OUTAGE_MAX_SECONDS: z.coerce.number().int().min(0).max(86400).default(3600).meta({
    description:
      'while no Keycloak node can be reached, a cached Basic login (the same user name and password only) is still served up to this long after Keycloak last verified it, never longer than its token lives; once Keycloak answers again it is verified afresh at its next use (0 or at most `BASIC_CACHE_MAX_SECONDS`: no longer than that)',
  }),
  REALMGATE_CACHE_SECRET: fromFile(
    secret.optional().meta({
      description:
        'key of the HMAC that names cached Basic logins, and from which the DPoP nonces are derived (`DPOP_NONCE`, which requires it), 16+ characters; set it when replicas share Redis, so that they share the cache, and the same on every replica',
      shownDefault: '(random, per process)',
    }),
  ),
  REVOCATION_CHECK_SECONDS: z
    .union([z.literal('off'), z.coerce.number().int().min(0).max(86400)])
    .default(60)
    .meta({
      description:
        'catches revocations made outside the gateway (user disabled, sessions deleted in the console): each distinct Bearer token is re-checked with Keycloak (introspection) at most once per this many seconds, and the request that finds it due waits for the answer; `0`: on every request (slow), `off`: never',
    }),
  REVOCATION_CHECK_WAIT_MS: z.coerce.number().int().min(0).max(60000).default(1000).meta({
    description:
      'how long the request that finds its token due for a re-check waits for Keycloak; slower (or Keycloak unreachable), it is served on the local verification and the answer applies from the next request (`0`: never wait, check in the background); the same for the first unbound token of a realm whose DPoP switch no replica has read',
  }),
  KEY_SET_REFRESH_SECONDS: z.coerce.number().int().min(1).max(3600).default(30).meta({
    description:
      "each realm's key set is fetched again at most this often (less up to a fifth at random) while its tokens are in use: a signing key removed in Keycloak stops verifying within it, tokens already seen included; a failed fetch keeps the last good set",
  }),
  AUTOMATION_UPSTREAM_URL: url.optional().meta({
    description:
      'when set, `/api/<org>/workspaces/<ws>/ita/...` is forwarded there with identity headers',
    shownDefault: '(built-in operation list)',
  }),
  TRUSTED_PROXIES: z
    .string()
    .transform((value, ctx) => {
      try {
        return parseTrustedProxies(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    })
    .optional()
    .meta({
      description:
        'addresses or CIDR ranges of the proxies in front of the gateway, comma-separated (e.g. `10.0.0.0/8,::1`), whose `X-Forwarded-For`, `-Proto` and `-Host` are believed; none: the gateway forwards and throttles by the address it sees',
      shownDefault: '(none)',
    }),

  /** Counted by src/auth/login-throttle.ts. */
  LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: z.coerce
    .number()
    .int()
    .min(0)
    .max(10000)
    .default(5)
    .meta({
      description:
        'failed password attempts (Basic, password grant, login form) of one account from one client address per window before 429 with `Retry-After` (0: no limit); one address never locks an account for another; a wrong password repeated within the window counts once',
    }),
  LOGIN_MAX_FAILURES_PER_ADDRESS: z.coerce.number().int().min(0).max(1000000).default(100).meta({
    description:
      'failed password attempts from one client address, all accounts, per window before 429 (0: no limit); a password or one-time password posted to a login page without a user name (identity-first login, the one-time-password page) counts here only',
  }),
  LOGIN_FAILURE_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86400).default(300).meta({
    description:
      "the login throttle's window, and how long a wrong password is remembered (a repeat is refused without asking Keycloak, and not counted again)",
  }),

  DATABASE_URL: fromFile(
    databaseUrl.optional().meta({
      description:
        'PostgreSQL connection string of the platform database, `postgres://[user:password@]host[:port]/database[?options]` (`postgresql://` alike) or the absolute path of a Unix socket directory',
      shownDefault: '(embedded PGlite in `DATA_DIR`)',
    }),
  ),
  DATABASE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(60000).default(5000).meta({
    description:
      'how long making a PostgreSQL connection may take (TCP, TLS, sign-in); a request waiting for a connection the pool cannot make is answered 503 `503-00003` once it passes',
  }),
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3600000).default(15000).meta({
    description:
      "PostgreSQL's `statement_timeout` for the gateway's queries, and, with `DATABASE_CONNECT_TIMEOUT_MS` added, how long the gateway waits for any answer before it drops the connection (a server that accepts and never answers); past either, 503 `503-00003`. It also bounds each migration statement's wait for a table lock (`lock_timeout`): past it the start fails. Audit exports, download jobs and audit log pruning under `DATABASE_SPARED_TIMEOUT_MS` instead (see \"Database timeouts\" in [operations](operations.md))",
  }),
  DATABASE_SPARED_TIMEOUT_MS: z.coerce.number().int().min(1000).max(600000).default(300000).meta({
    description:
      "what one step of the work spared from `DATABASE_STATEMENT_TIMEOUT_MS` may take instead: an audit export's chunk, a download job's count, the audit log pruning of one organization. Its `statement_timeout`, and with `DATABASE_CONNECT_TIMEOUT_MS` added its wait for any answer; past either the export ends with an error (503 `503-00003`, or a download cut short once it began), the download job is `Failed`, the pruning is tried again at its next run. Each statement of the migration at start is bounded the same way (past it the start fails): raise it before an upgrade whose migration rewrites a table that takes longer. At most 10 minutes. A download job's run is taken as lost (`Failed`) only once it is older than its statements may take under this bound (about 9 times it, with the waits for a connection)",
  }),
  DATA_DIR: z.string().min(1).default('.data').meta({
    description: "local state: the embedded database, the local Keycloak's data, demo secrets",
  }),
  REDIS_URL: fromFile(
    redisUrl.optional().meta({
      description:
        'Redis connection string, `redis://[user:password@]host[:port][/database]` (`rediss://` with TLS) or the path of a Unix socket: the cache and the messages replicas share',
      shownDefault: '(in-process cache)',
    }),
  ),
  REDIS_KEY_PREFIX: z.string().default('realmgate:').meta({
    description: 'prefix of every Redis key',
  }),
  MEMORY_CACHE_MAX_ENTRIES: z.coerce.number().int().min(1).default(100000).meta({
    description:
      'bound of the in-process cache (least recently used goes first), and apart from it of the used DPoP proofs kept in memory (never pushed out: past it a new proof is refused until the oldest leave their window; past half of it, so are the proofs of a key holding a sixteenth of it)',
  }),

  AUDIT_LOG_ENABLED: boolFlag.default(false).meta({
    description:
      'the audit log (see [audit](audit.md)), off until its cost meets its target: each `/api` decision, token grant and change through the gateway, one hash-chained log per organization in the database; `false`: nothing is recorded there (audit lines are still logged)',
  }),
  AUDIT_RETENTION_DAYS: z.coerce.number().int().min(1).max(36500).default(365).meta({
    description:
      'days an audit log record is kept, for an organization that did not choose its own (and for `master`); older ones are removed hourly, always the oldest first and up to a checkpoint, so what remains still verifies',
  }),
  AUDIT_RETENTION_MIN_DAYS: z.coerce.number().int().min(1).max(36500).default(90).meta({
    description:
      "the fewest days an organization's administrator may choose to keep its audit log (`PUT .../audit-log/retention`); at most `AUDIT_RETENTION_DAYS`",
  }),
  AUDIT_RETENTION_MAX_DAYS: z.coerce.number().int().min(1).max(36500).default(3650).meta({
    description:
      "the most days an organization's administrator may choose to keep its audit log; at least `AUDIT_RETENTION_DAYS`. A choice outside the bounds (they were changed since) is taken at the nearest bound",
  }),
  AUDIT_SIGNING_KEY: fromFile(
    pemOf(ed25519PrivateKeyOf).optional().meta({
      description:
        'the Ed25519 private key (PKCS#8 PEM) that signs audit log checkpoints, the same on every replica; its public key and `AUDIT_SIGNING_PREVIOUS_KEYS` are published at `/.well-known/audit-keys`, never a key the database holds; unset: each process signs with a key of its own made at start and never stored (its public key is kept in the database and published)',
      shownDefault: '(a key per process)',
    }),
  ),
  AUDIT_SIGNING_PREVIOUS_KEYS: fromFile(
    pemOf(ed25519PublicKeysOf).optional().meta({
      description:
        'public keys (PEM, one after the other) of audit signing keys used before `AUDIT_SIGNING_KEY`: still published, so checkpoints they signed still verify',
      shownDefault: '(none)',
    }),
  ),
  AUDIT_CHECKPOINT_RECORDS: z.coerce.number().int().min(1).max(1_000_000).default(1000).meta({
    description:
      "an organization's audit log is checkpointed (its head signed) after this many new records, or after `AUDIT_CHECKPOINT_SECONDS`, whichever comes first",
  }),
  AUDIT_CHECKPOINT_SECONDS: z.coerce.number().int().min(1).max(86400).default(60).meta({
    description:
      'at most this long between a record and the checkpoint that signs it (records after the last checkpoint can be cut off unnoticed)',
  }),
  AUDIT_SPOOL_MAX_RECORDS: z.coerce.number().int().min(100).max(10_000_000).default(100000).meta({
    description:
      'records a process holds while the database is down (about 1 KiB each), written in order once it is back; one more is lost, counted in `realmgate_audit_records_total{outcome="lost"}` and said in readiness',
  }),
  // A batch is one transaction (statements of at most 96 KiB each, audit-batch.ts); 2,000 records
  // keep it short. Each costs the gateway and PostgreSQL a transaction: fewer, fuller ones cost
  // less a record.
  AUDIT_BATCH_MAX_RECORDS: z.coerce.number().int().min(1).max(2000).default(2000).meta({
    description: 'records written in one transaction (at most 2,000)',
  }),
  AUDIT_FLUSH_INTERVAL_MS: z.coerce.number().int().min(10).max(60000).default(1000).meta({
    description:
      'how often spooled records are written (sooner when a batch is full), so at most this long of records is lost when a process is killed without its shutdown; also how often a write is retried while the database is down',
  }),

  AUDIT_EXPORT_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(DATABASE_POOL_SIZE / 2)
    .default(4)
    .meta({
      description: `audit log page reads, exports, downloads and download job runs a process runs at once; each holds one of its ${DATABASE_POOL_SIZE} database connections while it reads (a page's statements up to \`DATABASE_STATEMENT_TIMEOUT_MS\` each, an export's chunks up to \`DATABASE_SPARED_TIMEOUT_MS\`), so at most half of them, and the rest serve the other requests; one organization's callers (all platform administrators together) hold all but one of them at most, and exports, downloads and job runs leave one to page reads (all but one of the process's, and all but one of an organization's share: minutes-long exports never hold every page read back). A read, export or download over it is refused at once, 429 \`429-40001\` with \`Retry-After\`; a download job waits its turn (\`NotExecuted\`)`,
    }),

  AUDIT_KEYCLOAK_EVENTS_SECONDS: z.coerce.number().int().min(0).max(3600).default(30).meta({
    description:
      "how often each realm's own Keycloak events (sign-ins, admin changes made in Keycloak) are pulled, whether the audit log is on or off: a credential change seen in them ends the user's cached Basic logins and remembered wrong passwords within this plus 5 seconds and the time a round over every realm takes (4 realms at a time; see [audit](audit.md)); with the audit log on they are also written to it, a record arriving as soon; the gateway turns event saving on in every realm it pulls (see [audit](audit.md)); `0`: not pulled (such changes take effect only within `BASIC_CACHE_MAX_SECONDS` and `LOGIN_FAILURE_WINDOW_SECONDS`)",
  }),

  AUDIT_OTEL_LOGS: boolFlag.default(false).meta({
    description:
      'also send each audit record as an OpenTelemetry log record (its chosen fields as attributes) to `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/logs`, the collector of the traces, which must be set (see [audit](audit.md)); with the audit log on',
  }),

  REALMGATE_DEMO: boolFlag.default(false).meta({
    description: 'demo mode (`npm start` sets it): generated secrets, demo realm, users and data',
  }),
  REALMGATE_DEMO_PASSWORD: fromFile(
    z.string().min(8).optional().meta({
      description:
        'password of every demo user, 8+ characters; generated once and printed when unset',
      shownDefault: '(generated)',
    }),
  ),
});

export type Config = Readonly<z.output<typeof configSchema>>;

type Setting = keyof typeof configSchema.shape;

/** Every setting, in schema order. */
const SETTINGS = Object.keys(configSchema.shape) as Setting[];

/** The default retention must lie within the bounds organizations choose within. */
function retentionBoundsProblems(config: z.output<typeof configSchema>): string[] {
  const { AUDIT_RETENTION_DAYS: days, AUDIT_RETENTION_MIN_DAYS: min } = config;
  const max = config.AUDIT_RETENTION_MAX_DAYS;
  if (min <= days && days <= max) return [];
  return [
    `AUDIT_RETENTION_DAYS: must lie within AUDIT_RETENTION_MIN_DAYS and AUDIT_RETENTION_MAX_DAYS (${min} to ${max})`,
  ];
}

/** The settings also read from `<NAME>_FILE` (see `fromFile`), in schema order. */
export const FILE_SETTINGS: readonly Setting[] = SETTINGS.filter((name) =>
  fileSettings.has(configSchema.shape[name]),
);

/**
 * Settings realmgate no longer reads, with what to set instead: a configuration that still
 * sets one is refused rather than silently running on a default.
 */
export const RENAMED_SETTINGS: Readonly<Record<string, string>> = {
  LOGIN_MAX_FAILURES_PER_USER:
    'replaced by LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: failed logins are now counted per account and client address',
  BASIC_REFUSAL_CACHE_SECONDS:
    "replaced by LOGIN_FAILURE_WINDOW_SECONDS: a wrong password (Basic or password grant) is now remembered for the login throttle's window, and a repeat is not counted again",
  LOGIN_WAIT_SECONDS:
    'a password attempt now waits for the attempts in flight as long as they may take (AUTH_PROXY_TIMEOUT_MS plus three times KEYCLOAK_TIMEOUT_MS), so that a right login behind a slow Keycloak is answered rather than refused: set those',
};

/** Secrets without a default: required unless demo mode generates them. */
export const requiredSecrets = ['KEYCLOAK_ADMIN_PASSWORD', 'KEYCLOAK_CLIENT_SECRET'] as const;

export class ConfigError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** `<NAME>_FILE` of any setting: those of `FILE_SETTINGS` are read, the others refused. */
const isFileVariable = (key: string) =>
  key.endsWith('_FILE') && key.slice(0, -5) in configSchema.shape;

/**
 * Validates the whole environment once and reports every problem together.
 * Empty strings count as unset, as they do in most `.env` tooling. A setting of `FILE_SETTINGS`
 * may come from the file `<NAME>_FILE` names instead (see setting-files.ts).
 */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const given = Object.fromEntries(
    Object.entries(env).filter(
      ([key, v]) =>
        (key in configSchema.shape || isFileVariable(key)) && v !== undefined && v !== '',
    ),
  ) as Record<string, string>;
  const files = resolveSettingFiles(given, SETTINGS, FILE_SETTINGS);
  const present = files.env;
  const parsed = configSchema.safeParse(present);
  // Messages never quote a value; one read from a file is named by its variable too.
  const nameOf = (name: string) =>
    files.fromFile.has(name) ? `${name} (from ${fileVariableOf(name)})` : name;
  const problems = [
    ...files.problems,
    ...(parsed.success
      ? []
      : parsed.error.issues.map(
          (issue) =>
            `${[nameOf(String(issue.path[0])), ...issue.path.slice(1)].join('.')}: ${issue.message}`,
        )),
  ];
  for (const [name, instead] of Object.entries(RENAMED_SETTINGS)) {
    if (env[name] !== undefined && env[name] !== '') problems.push(`${name}: ${instead}`);
  }
  // Judged on the raw input so that missing secrets are reported alongside other problems.
  const demo = configSchema.shape.REALMGATE_DEMO.safeParse(present.REALMGATE_DEMO).data === true;
  if (!demo) {
    for (const name of requiredSecrets) {
      // A file that could not be read is reported as such above.
      if (present[name] === undefined && given[fileVariableOf(name)] === undefined) {
        problems.push(`${name}: required (only demo mode generates secrets)`);
      }
    }
  }
  if (parsed.success) problems.push(...retentionBoundsProblems(parsed.data));
  // Every replica must derive the same nonces, from a secret of the gateway's own: not one
  // Keycloak holds in every realm (the client secret), and not a per-process random one.
  if (parsed.success && parsed.data.DPOP_NONCE && !parsed.data.REALMGATE_CACHE_SECRET && !demo) {
    problems.push(
      'DPOP_NONCE: needs REALMGATE_CACHE_SECRET (the nonces are keyed with it, the same on every replica)',
    );
  }
  if (parsed.success && parsed.data.AUDIT_OTEL_LOGS && !parsed.data.OTEL_EXPORTER_OTLP_ENDPOINT) {
    problems.push('AUDIT_OTEL_LOGS: needs OTEL_EXPORTER_OTLP_ENDPOINT (where the logs go)');
  }
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(parsed.data);
}
