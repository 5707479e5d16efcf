import { generateKeyPairSync } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, requiredSecrets } from '../../../src/config/config.ts';
import { ASYMMETRIC_ALGORITHMS } from '../../../src/config/jws-algorithms.ts';
import { adminPassword, clientSecret, problemsOf } from '../../helpers/config-problems.ts';

const secrets = { KEYCLOAK_ADMIN_PASSWORD: adminPassword, KEYCLOAK_CLIENT_SECRET: clientSecret };

describe('loadConfig', () => {
  it('applies every default in demo mode', () => {
    expect(loadConfig({ REALMGATE_DEMO: 'true' })).toStrictEqual({
      HOST: '0.0.0.0',
      PORT: 8000,
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: 8001,
      PUBLIC_URL: 'http://localhost:8000',
      ADMIN_PUBLIC_URL: 'http://localhost:8001',
      LOG_LEVEL: 'info',
      KEYCLOAK_HTTP_PORT: 8080,
      KEYCLOAK_MANAGEMENT_PORT: 9000,
      KEYCLOAK_ADMIN_USERNAME: 'admin',
      KEYCLOAK_TIMEOUT_MS: 5000,
      AUTH_PROXY_TIMEOUT_MS: 30000,
      PROXY_ANSWER_DEADLINE_SECONDS: 300,
      SHUTDOWN_GRACE_SECONDS: 10,
      WORKERS: availableParallelism(),
      METRICS_ENABLED: true,
      OTEL_SERVICE_NAME: 'realmgate',
      OTEL_TRACES_SAMPLER_ARG: 1,
      TOKEN_CLOCK_LEEWAY_SECONDS: 10,
      DPOP_ALGORITHMS: [...ASYMMETRIC_ALGORITHMS],
      DPOP_PROOF_MAX_AGE_SECONDS: 60,
      DPOP_PROOF_AHEAD_SECONDS: 5,
      DPOP_NONCE: false,
      BASIC_CACHE_MAX_SECONDS: 60,
      BASIC_OUTAGE_MAX_SECONDS: 3600,
      REVOCATION_CHECK_SECONDS: 60,
      REVOCATION_CHECK_WAIT_MS: 1000,
      KEY_SET_REFRESH_SECONDS: 30,
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: 5,
      LOGIN_MAX_FAILURES_PER_ADDRESS: 100,
      LOGIN_FAILURE_WINDOW_SECONDS: 300,
      DATABASE_CONNECT_TIMEOUT_MS: 5000,
      DATABASE_STATEMENT_TIMEOUT_MS: 15000,
      DATABASE_SPARED_TIMEOUT_MS: 300000,
      DATA_DIR: '.data',
      REDIS_KEY_PREFIX: 'realmgate:',
      MEMORY_CACHE_MAX_ENTRIES: 100000,
      AUDIT_LOG_ENABLED: false,
      AUDIT_RETENTION_DAYS: 365,
      AUDIT_RETENTION_MIN_DAYS: 90,
      AUDIT_RETENTION_MAX_DAYS: 3650,
      AUDIT_CHECKPOINT_RECORDS: 1000,
      AUDIT_CHECKPOINT_SECONDS: 60,
      AUDIT_SPOOL_MAX_RECORDS: 100000,
      AUDIT_BATCH_MAX_RECORDS: 2000,
      AUDIT_FLUSH_INTERVAL_MS: 1000,
      AUDIT_EXPORT_CONCURRENCY: 4,
      AUDIT_KEYCLOAK_EVENTS_SECONDS: 30,
      AUDIT_OTEL_LOGS: false,
      REALMGATE_DEMO: true,
    });
  });

  it('keeps the default audit retention within the bounds organizations choose within', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig({ REALMGATE_DEMO: 'true', ...env });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    expect(problems({ AUDIT_RETENTION_DAYS: '30' })).toEqual([
      'AUDIT_RETENTION_DAYS: must lie within AUDIT_RETENTION_MIN_DAYS and AUDIT_RETENTION_MAX_DAYS (90 to 3650)',
    ]);
    expect(problems({ AUDIT_RETENTION_DAYS: '30', AUDIT_RETENTION_MIN_DAYS: '7' })).toEqual([]);
  });

  it('refuses a REDIS_URL that ioredis would misread (no Redis, silently), and never repeats it', () => {
    // `http://...` is read as a Unix socket `//redis:6379`, `redis:6379` as the host `redis`
    // on the default port; a bad port throws inside ioredis at start, the URL (and its
    // password) in the error's `input`.
    for (const value of [
      'http://:s3cret-pw@redis:6379',
      'redis://:s3cret-pw@redis:port',
      'redis:6379',
      'redis://:s3cret-pw@redis:6379/zero',
    ]) {
      const problems = problemsOf({ ...secrets, REDIS_URL: value });
      expect(problems).toEqual([
        'REDIS_URL: must be redis://[user:password@]host[:port][/database] (rediss:// with TLS), or the absolute path of a Unix socket',
      ]);
      expect(problems.join()).not.toContain('s3cret');
    }
    for (const value of [
      'redis://:pw@redis:6379',
      'rediss://user:pw@redis.internal:6380/2',
      'redis://[::1]:6379/',
      '/run/redis/redis.sock',
    ]) {
      expect(loadConfig({ ...secrets, REDIS_URL: value }).REDIS_URL).toBe(value);
    }
  });

  it('refuses a DATABASE_URL that is no PostgreSQL URL (pg fails late, the URL in its error), and never repeats it', () => {
    // libpq's keyword form is read as a database of that name on the host `base`, `db:5432/app`
    // as the database `432/app` on localhost; a bad port or a malformed escape throws inside pg
    // at the first query, the URL (and its password) in the error's `input`.
    for (const value of [
      'host=db user=app password=s3cret-pw',
      'db:5432/app',
      'http://app:s3cret-pw@db:5432/app',
      'postgres://app:s3cret-pw@db:port/app',
      'postgres://app:s3cret-pw%zz@db:5432/app',
      ' postgres://app:s3cret-pw@db:5432/app',
    ]) {
      const problems = problemsOf({ ...secrets, DATABASE_URL: value });
      expect(problems).toEqual([
        'DATABASE_URL: must be postgres://[user:password@]host[:port]/database[?options] (postgresql:// alike), or the absolute path of a Unix socket directory',
      ]);
      expect(problems.join()).not.toContain('s3cret');
    }
    for (const value of [
      'postgres://app:pw@db:5432/app',
      'postgresql://app:p%40ss@db.internal/app?sslmode=require',
      'postgres://app@[::1]:5432/app',
      'postgres://app@/app?host=/run/postgresql',
      'postgres:///app',
      '/run/postgresql app',
    ]) {
      expect(loadConfig({ ...secrets, DATABASE_URL: value }).DATABASE_URL).toBe(value);
    }
  });

  it('reads the audit signing key as an Ed25519 PEM, and never repeats it', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    let problems: string[] = [];
    try {
      loadConfig({
        REALMGATE_DEMO: 'true',
        AUDIT_SIGNING_KEY: pem,
        AUDIT_SIGNING_PREVIOUS_KEYS: 'junk',
      });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([
      'AUDIT_SIGNING_KEY: must be an Ed25519 key, not rsa',
      'AUDIT_SIGNING_PREVIOUS_KEYS: holds no PEM public key',
    ]);
    const ed = generateKeyPairSync('ed25519');
    const config = loadConfig({
      REALMGATE_DEMO: 'true',
      AUDIT_SIGNING_KEY: ed.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    });
    expect(config.AUDIT_SIGNING_KEY).toContain('BEGIN PRIVATE KEY');
  });

  it('accepts a production configuration with both secrets', () => {
    const config = loadConfig({
      ...secrets,
      PORT: '9000',
      KEYCLOAK_URL: 'http://keycloak:8080/auth',
    });
    expect(config.REALMGATE_DEMO).toBe(false);
    expect(config.PORT).toBe(9000);
    expect(config.KEYCLOAK_URL).toEqual(['http://keycloak:8080/auth']);
    expect(config.KEYCLOAK_ADMIN_PASSWORD).toBe(adminPassword);
    expect(config.KEYCLOAK_CLIENT_SECRET).toBe(clientSecret);
  });

  it('refuses a setting it no longer reads, saying what replaced it', () => {
    expect(() => loadConfig({ ...secrets, LOGIN_MAX_FAILURES_PER_USER: '5' })).toThrow(
      /LOGIN_MAX_FAILURES_PER_USER: replaced by LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS/,
    );
  });

  it('reads TRUSTED_PROXIES as addresses and CIDR ranges, and names a bad entry', () => {
    const trusted = loadConfig({
      ...secrets,
      TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.7,::1',
    }).TRUSTED_PROXIES!;
    expect(trusted.check('10.1.2.3', 'ipv4')).toBe(true);
    expect(trusted.check('192.168.1.7', 'ipv4')).toBe(true);
    expect(trusted.check('192.168.1.8', 'ipv4')).toBe(false);
    expect(trusted.check('::1', 'ipv6')).toBe(true);
    for (const bad of ['10.0.0.0/33', 'proxy.example', '10.0.0.1/8/1', '::1/129', '1.2.3.4/x']) {
      expect(() => loadConfig({ ...secrets, TRUSTED_PROXIES: bad }), bad).toThrow(
        /TRUSTED_PROXIES: not an IP address or CIDR range/,
      );
    }
  });

  it('reads REVOCATION_CHECK_SECONDS as seconds or off', () => {
    expect(loadConfig({ ...secrets, REVOCATION_CHECK_SECONDS: '0' }).REVOCATION_CHECK_SECONDS).toBe(
      0,
    );
    expect(
      loadConfig({ ...secrets, REVOCATION_CHECK_SECONDS: 'off' }).REVOCATION_CHECK_SECONDS,
    ).toBe('off');
    expect(() => loadConfig({ ...secrets, REVOCATION_CHECK_SECONDS: 'sometimes' })).toThrow(
      /REVOCATION_CHECK_SECONDS/,
    );
  });

  it("refuses DPOP_NONCE without REALMGATE_CACHE_SECRET, the nonces' key (not the client secret)", () => {
    expect(problemsOf({ ...secrets, DPOP_NONCE: 'true' })).toEqual([
      'DPOP_NONCE: needs REALMGATE_CACHE_SECRET (the nonces are keyed with it, the same on every replica)',
    ]);
    const cacheSecret = 'a-secret-of-the-gateway-own';
    expect(
      loadConfig({ ...secrets, DPOP_NONCE: 'true', REALMGATE_CACHE_SECRET: cacheSecret })
        .DPOP_NONCE,
    ).toBe(true);
    // Demo mode: one process, whose random secret its workers share.
    expect(loadConfig({ ...secrets, DPOP_NONCE: 'true', REALMGATE_DEMO: 'true' }).DPOP_NONCE).toBe(
      true,
    );
  });

  it('refuses AUDIT_OTEL_LOGS without an OTLP endpoint to send the records to', () => {
    expect(problemsOf({ ...secrets, AUDIT_OTEL_LOGS: 'true' })).toEqual([
      'AUDIT_OTEL_LOGS: needs OTEL_EXPORTER_OTLP_ENDPOINT (where the logs go)',
    ]);
    const endpoint = 'http://collector:4318';
    expect(
      loadConfig({ ...secrets, AUDIT_OTEL_LOGS: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: endpoint })
        .AUDIT_OTEL_LOGS,
    ).toBe(true);
  });

  it('reads the boolean flag spellings and refuses others', () => {
    for (const [value, expected] of [
      ['true', true],
      ['1', true],
      ['yes', true],
      ['false', false],
      ['0', false],
      ['no', false],
    ] as const) {
      expect(loadConfig({ ...secrets, REALMGATE_DEMO: value }).REALMGATE_DEMO, value).toBe(
        expected,
      );
    }
    expect(problemsOf({ ...secrets, REALMGATE_DEMO: 'maybe' }).map(keyOf)).toEqual([
      'REALMGATE_DEMO',
    ]);
  });

  it('requires both secrets outside demo mode', () => {
    const problems = problemsOf({});
    expect(problems).toEqual([
      'KEYCLOAK_ADMIN_PASSWORD: required (only demo mode generates secrets)',
      'KEYCLOAK_CLIENT_SECRET: required (only demo mode generates secrets)',
    ]);
    expect(requiredSecrets).toEqual(['KEYCLOAK_ADMIN_PASSWORD', 'KEYCLOAK_CLIENT_SECRET']);
  });

  it('reports invalid values together', () => {
    const problems = problemsOf({
      ...secrets,
      PORT: 'eighty',
      ADMIN_PORT: '70000',
      PUBLIC_URL: 'ftp://gateway.example.com',
      LOG_LEVEL: 'verbose',
    });
    expect(problems.map(keyOf)).toEqual(['PORT', 'ADMIN_PORT', 'PUBLIC_URL', 'LOG_LEVEL']);
    expect(problems).toContain('PUBLIC_URL: must be an http(s) URL');
  });

  it('reports invalid values and missing secrets in one ConfigError', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'eighty', PUBLIC_URL: 'ftp://gateway.example.com' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { problems, message } = error as ConfigError;
    expect(problems.map(keyOf)).toEqual([
      'PORT',
      'PUBLIC_URL',
      'KEYCLOAK_ADMIN_PASSWORD',
      'KEYCLOAK_CLIENT_SECRET',
    ]);
    expect(problems).toContain('PUBLIC_URL: must be an http(s) URL');
    expect(problems).toContain(
      'KEYCLOAK_CLIENT_SECRET: required (only demo mode generates secrets)',
    );
    for (const problem of problems) expect(message).toContain(`\n  - ${problem}`);
  });

  it('refuses secrets shorter than 16 characters, in demo mode too', () => {
    expect(
      problemsOf({ KEYCLOAK_ADMIN_PASSWORD: 'short', KEYCLOAK_CLIENT_SECRET: '0123456789abcde' }),
    ).toEqual([
      'KEYCLOAK_ADMIN_PASSWORD: must be at least 16 characters',
      'KEYCLOAK_CLIENT_SECRET: must be at least 16 characters',
    ]);
    expect(problemsOf({ REALMGATE_DEMO: 'true', KEYCLOAK_CLIENT_SECRET: 'short' })).toEqual([
      'KEYCLOAK_CLIENT_SECRET: must be at least 16 characters',
    ]);
    const sixteen = '0123456789abcdef';
    const config = loadConfig({
      KEYCLOAK_ADMIN_PASSWORD: sixteen,
      KEYCLOAK_CLIENT_SECRET: sixteen,
    });
    expect(config.KEYCLOAK_ADMIN_PASSWORD).toBe(sixteen);
  });

  it('treats empty strings as unset', () => {
    const config = loadConfig({
      REALMGATE_DEMO: 'true',
      PORT: '',
      PUBLIC_URL: '',
      KEYCLOAK_URL: '',
      DATABASE_URL: '',
      KEYCLOAK_CLIENT_SECRET: '',
    });
    expect(config.PORT).toBe(8000);
    expect(config.PUBLIC_URL).toBe('http://localhost:8000');
    expect(config.KEYCLOAK_URL).toBeUndefined();
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.KEYCLOAK_CLIENT_SECRET).toBeUndefined();
    // Outside demo mode an empty secret is missing, not too short.
    expect(
      problemsOf({ KEYCLOAK_ADMIN_PASSWORD: '', KEYCLOAK_CLIENT_SECRET: clientSecret }),
    ).toEqual(['KEYCLOAK_ADMIN_PASSWORD: required (only demo mode generates secrets)']);
  });

  it('ignores variables it does not know', () => {
    const config = loadConfig({ REALMGATE_DEMO: 'true', PATH: '/usr/bin', NODE_ENV: 'production' });
    expect(Object.keys(config)).not.toContain('PATH');
    expect(Object.keys(config)).not.toContain('NODE_ENV');
  });

  it('strips trailing slashes from URLs', () => {
    const config = loadConfig({
      ...secrets,
      PUBLIC_URL: 'https://gateway.example.com/',
      ADMIN_PUBLIC_URL: 'https://admin.example.com:8443//',
      KEYCLOAK_URL: 'http://keycloak:8080/auth/',
    });
    expect(config.PUBLIC_URL).toBe('https://gateway.example.com');
    expect(config.ADMIN_PUBLIC_URL).toBe('https://admin.example.com:8443');
    expect(config.KEYCLOAK_URL).toEqual(['http://keycloak:8080/auth']);
  });

  it('reads KEYCLOAK_URL as the nodes of one Keycloak: trimmed, each a URL, none twice', () => {
    const config = loadConfig({
      ...secrets,
      KEYCLOAK_URL: ' http://kc-0:8080/auth/ ,http://kc-1:8080/auth',
    });
    expect(config.KEYCLOAK_URL).toEqual(['http://kc-0:8080/auth', 'http://kc-1:8080/auth']);
    expect(
      problemsOf({ ...secrets, KEYCLOAK_URL: 'http://kc-0:8080/auth,,ftp://kc-1/auth' }),
    ).toEqual([
      'KEYCLOAK_URL: entry 2: Invalid URL',
      'KEYCLOAK_URL: entry 3: must be an http(s) URL',
    ]);
    // The same node twice, written differently: problems name the entry, never the URL.
    const repeated = problemsOf({
      ...secrets,
      KEYCLOAK_URL: 'http://user:secret@KC-0:8080/auth,http://user:secret@kc-0:8080/auth/',
    });
    expect(repeated).toEqual(['KEYCLOAK_URL: entry 2: repeats an earlier URL']);
    expect(problemsOf({ ...secrets, KEYCLOAK_URL: 'not a url' })).toEqual([
      'KEYCLOAK_URL: Invalid URL',
    ]);
    const seventeen = Array.from({ length: 17 }, (_, i) => `http://kc-${i}:8080/auth`).join(',');
    expect(problemsOf({ ...secrets, KEYCLOAK_URL: seventeen })).toEqual([
      'KEYCLOAK_URL: at most 16 URLs',
    ]);
  });

  it('returns a frozen configuration', () => {
    const config = loadConfig({ REALMGATE_DEMO: 'true' });
    expect(Object.isFrozen(config)).toBe(true);
    expect(() => {
      (config as { PORT: number }).PORT = 1;
    }).toThrow(TypeError);
    expect(config.PORT).toBe(8000);
  });
});

function keyOf(problem: string): string {
  return problem.slice(0, problem.indexOf(':'));
}

describe('WORKERS', () => {
  const workers = (value: string) => loadConfig({ REALMGATE_DEMO: 'true', WORKERS: value }).WORKERS;

  it('is one per core for auto, or the number given', () => {
    expect(workers('auto')).toBe(availableParallelism());
    expect(workers('1')).toBe(1);
    expect(workers('8')).toBe(8);
  });

  it('refuses what is not auto or a whole number from 1', () => {
    for (const value of ['0', '-1', '1.5', 'two', '1000']) {
      expect(() => workers(value), value).toThrow(ConfigError);
    }
  });
});
