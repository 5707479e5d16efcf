import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, FILE_SETTINGS, loadConfig } from '../../../src/config/config.ts';
import { MAX_SETTING_FILE_BYTES } from '../../../src/config/setting-files.ts';
import { adminPassword, clientSecret, problemsOf } from '../../helpers/config-problems.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'realmgate-config-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** A new file holding `content`; its path. */
function fileWith(content: string | Buffer): string {
  const file = path.join(dir, `setting-${files++}`);
  writeFileSync(file, content);
  return file;
}

/** A value valid for each file setting, not the same as any other. */
/** An Ed25519 key of the audit checkpoints: the private one as set, the public one as rotated out. */
const auditKey = generateKeyPairSync('ed25519');

const validValues: Record<string, string> = {
  AUDIT_SIGNING_KEY: auditKey.privateKey
    .export({ type: 'pkcs8', format: 'pem' })
    .toString()
    .trimEnd(),
  AUDIT_SIGNING_PREVIOUS_KEYS: auditKey.publicKey
    .export({ type: 'spki', format: 'pem' })
    .toString()
    .trimEnd(),
  KEYCLOAK_DB_URL: 'postgres://keycloak:db-pass-from-file@127.0.0.1:5432/keycloak',
  KEYCLOAK_ADMIN_PASSWORD: adminPassword,
  KEYCLOAK_CLIENT_SECRET: clientSecret,
  REALMGATE_CACHE_SECRET: 'cache-secret-from-a-file-0123',
  DATABASE_URL: 'postgres://realmgate:pg-pass-from-file@127.0.0.1:5432/realmgate',
  REDIS_URL: 'redis://:redis-pass-from-file@127.0.0.1:6379',
  REALMGATE_DEMO_PASSWORD: 'demo-password-from-file',
  OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=key-from-a-file',
};

/** The settings whose value is parsed into something else than the string. */
const parsed: Record<string, unknown> = {
  OTEL_EXPORTER_OTLP_HEADERS: { 'x-api-key': 'key-from-a-file' },
};

describe('settings from files (<NAME>_FILE)', () => {
  it('reads exactly the settings that can carry a credential', () => {
    expect([...FILE_SETTINGS].sort()).toEqual(Object.keys(validValues).sort());
  });

  it('reads every file setting, dropping one trailing newline (\\n or \\r\\n)', () => {
    const endings = ['', '\n', '\r\n'];
    for (const [i, ending] of endings.entries()) {
      const env = Object.fromEntries(
        FILE_SETTINGS.map((name) => [`${name}_FILE`, fileWith(validValues[name] + ending)]),
      );
      const config: Record<string, unknown> = loadConfig(env);
      for (const name of FILE_SETTINGS) {
        expect(config[name], `${name}, ending ${i}`).toEqual(parsed[name] ?? validValues[name]);
      }
    }
  });

  it('drops one newline only, and nothing else', () => {
    const config = loadConfig({
      REALMGATE_DEMO: 'true',
      REDIS_URL_FILE: fileWith('redis://127.0.0.1:6379\n\n'),
      DATABASE_URL_FILE: fileWith('postgres://x@db/realmgate\n'),
      REALMGATE_DEMO_PASSWORD_FILE: fileWith('demo pass\r\n\r\n'),
    });
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379\n');
    expect(config.DATABASE_URL).toBe('postgres://x@db/realmgate');
    expect(config.REALMGATE_DEMO_PASSWORD).toBe('demo pass\r\n');
  });

  it('satisfies the required secrets outside demo mode', () => {
    const config = loadConfig({
      KEYCLOAK_ADMIN_PASSWORD_FILE: fileWith(`${adminPassword}\n`),
      KEYCLOAK_CLIENT_SECRET: clientSecret,
    });
    expect(config.KEYCLOAK_ADMIN_PASSWORD).toBe(adminPassword);
    expect(config.KEYCLOAK_CLIENT_SECRET).toBe(clientSecret);
    expect(config.REALMGATE_DEMO).toBe(false);
    expect(Object.keys(config).filter((key) => key.endsWith('_FILE'))).toEqual([]);
  });

  it('refuses a setting given both ways, naming the variable and never the value', () => {
    const err = (() => {
      try {
        loadConfig({
          KEYCLOAK_ADMIN_PASSWORD: adminPassword,
          KEYCLOAK_ADMIN_PASSWORD_FILE: fileWith('another-admin-password-0123'),
          KEYCLOAK_CLIENT_SECRET: clientSecret,
        });
      } catch (caught) {
        return caught as ConfigError;
      }
      throw new Error('accepted');
    })();
    expect(err.problems).toEqual([
      'KEYCLOAK_ADMIN_PASSWORD: set either KEYCLOAK_ADMIN_PASSWORD or KEYCLOAK_ADMIN_PASSWORD_FILE, not both',
    ]);
    expect(err.message).not.toContain(adminPassword);
    expect(err.message).not.toContain('another-admin-password');
  });

  it('refuses a file it cannot read, naming the variable and the path', () => {
    const missing = path.join(dir, 'no-such-file');
    const directory = path.join(dir, 'a-directory');
    mkdirSync(directory);
    expect(
      problemsOf({
        KEYCLOAK_ADMIN_PASSWORD_FILE: missing,
        KEYCLOAK_CLIENT_SECRET_FILE: directory,
      }),
    ).toEqual([
      `KEYCLOAK_ADMIN_PASSWORD_FILE: cannot read ${missing} (ENOENT)`,
      `KEYCLOAK_CLIENT_SECRET_FILE: cannot read ${directory} (EISDIR)`,
    ]);
  });

  it('refuses an empty file, a file over 64 KiB and one that is not UTF-8, quoting no content', () => {
    const empty = fileWith('');
    const newlineOnly = fileWith('\n');
    const large = fileWith(Buffer.alloc(MAX_SETTING_FILE_BYTES + 1, 'k'));
    const binary = fileWith(Buffer.from([0x73, 0x65, 0xff, 0xfe, 0x63]));
    const problems = problemsOf({
      REALMGATE_DEMO: 'true',
      KEYCLOAK_ADMIN_PASSWORD_FILE: empty,
      KEYCLOAK_CLIENT_SECRET_FILE: newlineOnly,
      REALMGATE_CACHE_SECRET_FILE: large,
      DATABASE_URL_FILE: binary,
    });
    expect(problems).toEqual([
      `KEYCLOAK_ADMIN_PASSWORD_FILE: ${empty} is empty`,
      `KEYCLOAK_CLIENT_SECRET_FILE: ${newlineOnly} is empty`,
      `REALMGATE_CACHE_SECRET_FILE: ${large} is larger than ${MAX_SETTING_FILE_BYTES} bytes`,
      `DATABASE_URL_FILE: ${binary} is not UTF-8 text`,
    ]);
    expect(problems.join('\n')).not.toContain('kkkk');
  });

  it('reads no further than the limit (a device that never ends)', () => {
    expect(problemsOf({ REALMGATE_DEMO: 'true', REDIS_URL_FILE: '/dev/zero' })).toEqual([
      `REDIS_URL_FILE: /dev/zero is larger than ${MAX_SETTING_FILE_BYTES} bytes`,
    ]);
  });

  it("validates a file's content like the variable's, naming both and quoting neither", () => {
    const problems = problemsOf({
      KEYCLOAK_ADMIN_PASSWORD_FILE: fileWith('short-secret\n'),
      KEYCLOAK_CLIENT_SECRET: clientSecret,
      KEYCLOAK_DB_URL_FILE: fileWith('mysql://keycloak:db-secret@db/keycloak\n'),
    });
    expect(problems).toHaveLength(2);
    expect(problems).toContain(
      'KEYCLOAK_ADMIN_PASSWORD (from KEYCLOAK_ADMIN_PASSWORD_FILE): must be at least 16 characters',
    );
    expect(
      problems.some((p) => p.startsWith('KEYCLOAK_DB_URL (from KEYCLOAK_DB_URL_FILE): ')),
    ).toBe(true);
    expect(problems.join('\n')).not.toMatch(/short-secret|db-secret/);
  });

  it('refuses <NAME>_FILE for a setting that is not read from files', () => {
    const file = fileWith('9000\n');
    const problems = problemsOf({ REALMGATE_DEMO: 'true', PORT_FILE: file });
    expect(problems).toEqual([
      `PORT_FILE: PORT is not read from a file (only ${FILE_SETTINGS.join(', ')})`,
    ]);
  });

  it('treats an empty <NAME>_FILE as unset, and ignores _FILE variables of no setting', () => {
    const config = loadConfig({
      KEYCLOAK_ADMIN_PASSWORD: adminPassword,
      KEYCLOAK_ADMIN_PASSWORD_FILE: '',
      KEYCLOAK_CLIENT_SECRET: clientSecret,
      SOMETHING_ELSE_FILE: path.join(dir, 'no-such-file'),
    });
    expect(config.KEYCLOAK_ADMIN_PASSWORD).toBe(adminPassword);
  });

  it('reports a missing required secret once, not again after its unreadable file', () => {
    const missing = path.join(dir, 'missing-secret');
    expect(problemsOf({ KEYCLOAK_CLIENT_SECRET_FILE: missing })).toEqual([
      `KEYCLOAK_CLIENT_SECRET_FILE: cannot read ${missing} (ENOENT)`,
      'KEYCLOAK_ADMIN_PASSWORD: required (only demo mode generates secrets)',
    ]);
  });

  it('are named in the configuration reference (docs/configuration.md)', () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
    const reference = readFileSync(path.join(root, 'docs/configuration.md'), 'utf8');
    expect(FILE_SETTINGS.filter((name) => !reference.includes(`\`${name}_FILE\``))).toEqual([]);
  });
});
