import { expect } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.ts';

/** Keycloak secrets long enough for the configuration to take (it refuses short or default ones). */
export const adminPassword = 'admin-password-0123456789';
export const clientSecret = 'client-secret-0123456789';

/** The problems of a configuration that must be refused. */
export function problemsOf(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('loadConfig accepted the configuration');
}
