import { describe, expect, it } from 'vitest';
import { keycloakBuildOptions, keycloakHomeDir } from '../../../keycloak/distribution.ts';
import { parsePostgresUrl } from '../../../keycloak/postgres-url.ts';
import { loadConfig } from '../../../src/config/config.ts';

describe('parsePostgresUrl', () => {
  it("splits a URL into Keycloak's JDBC URL, user and password", () => {
    expect(parsePostgresUrl('postgres://kc:s%40cret@127.0.0.1:5433/keycloak')).toEqual({
      jdbcUrl: 'jdbc:postgresql://127.0.0.1:5433/keycloak',
      username: 'kc',
      password: 's@cret',
      display: 'postgres://kc:***@127.0.0.1:5433/keycloak',
    });
  });

  it('defaults the port, allows no password and keeps driver parameters', () => {
    expect(parsePostgresUrl('postgresql://postgres@db.internal/kc?sslmode=require')).toEqual({
      jdbcUrl: 'jdbc:postgresql://db.internal:5432/kc?sslmode=require',
      username: 'postgres',
      password: undefined,
      display: 'postgresql://postgres@db.internal/kc?sslmode=require',
    });
  });

  it.each(['mysql://u:p@h/db', 'postgres://u:p@h:5432/', 'postgres://u:p@h:5432/a/b', 'not a url'])(
    'refuses %s without repeating it',
    (value) => {
      expect(() => parsePostgresUrl(value)).toThrow();
      try {
        parsePostgresUrl(value);
      } catch (err) {
        expect((err as Error).message).not.toContain(':p@');
      }
    },
  );
});

describe('KEYCLOAK_DB_URL', () => {
  it('is optional and validated', () => {
    expect(loadConfig({ REALMGATE_DEMO: 'true' }).KEYCLOAK_DB_URL).toBeUndefined();
    const url = 'postgres://postgres@127.0.0.1:5432/keycloak';
    expect(loadConfig({ REALMGATE_DEMO: 'true', KEYCLOAK_DB_URL: url }).KEYCLOAK_DB_URL).toBe(url);
    expect(() =>
      loadConfig({ REALMGATE_DEMO: 'true', KEYCLOAK_DB_URL: 'mysql://u:hunter2@h/db' }),
    ).toThrow(/KEYCLOAK_DB_URL: must start with postgres/);
  });

  it('never puts the password in the error', () => {
    try {
      loadConfig({ REALMGATE_DEMO: 'true', KEYCLOAK_DB_URL: 'postgres://u:hunter2@h:5432/' });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).not.toContain('hunter2');
    }
  });
});

describe('distributions per database', () => {
  it('builds one cached home per --db, the H2 one where it always was', () => {
    expect(keycloakBuildOptions('postgres')).toContain('--db=postgres');
    expect(keycloakBuildOptions()).toContain('--db=dev-file');
    expect(keycloakHomeDir('/c', 'dev-file')).toBe('/c/keycloak-26.7.4');
    expect(keycloakHomeDir('/c', 'postgres')).toBe('/c/keycloak-26.7.4-postgres');
  });
});
