import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import type { LocalKeycloak } from '../../keycloak/launcher.ts';
import { loadConfig } from '../../src/config/config.ts';
import { startGateway, type Gateway } from '../../src/gateway.ts';
import { createLogger } from '../../src/http/logger.ts';
import { startConfiguredKeycloak } from '../../src/keycloak/local-keycloak.ts';
import type { TestEnv } from './test-env.ts';

/**
 * Starts the stack the integration tests talk to: a real Keycloak (local, fresh state per run,
 * unless KEYCLOAK_URL names one), real PostgreSQL and Redis, and the gateway on ports of its own
 * so that a running `npm start` is not disturbed.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dataDir = path.resolve('.data/test');
  const external = process.env.KEYCLOAK_URL;
  if (!external) await rm(path.join(dataDir, 'keycloak'), { recursive: true, force: true });
  const env = {
    PORT: '18000',
    ADMIN_PORT: '18001',
    HOST: '127.0.0.1',
    PUBLIC_URL: 'http://127.0.0.1:18000',
    ADMIN_PUBLIC_URL: 'http://127.0.0.1:18001',
    KEYCLOAK_URL: external,
    KEYCLOAK_HTTP_PORT: '18080',
    KEYCLOAK_MANAGEMENT_PORT: '19000',
    KEYCLOAK_ADMIN_USERNAME: process.env.KEYCLOAK_ADMIN_USERNAME ?? 'admin',
    KEYCLOAK_ADMIN_PASSWORD: external ? process.env.KEYCLOAK_ADMIN_PASSWORD : randomSecret(),
    KEYCLOAK_CLIENT_SECRET: external ? process.env.KEYCLOAK_CLIENT_SECRET : randomSecret(),
    DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: `realmgate-test:${randomBytes(4).toString('hex')}:`,
    DATA_DIR: dataDir,
    // Short bounds so expiry and password-change tests finish in seconds.
    BASIC_CACHE_MAX_SECONDS: '3',
    TOKEN_CLOCK_LEEWAY_SECONDS: '1',
    REALMGATE_CACHE_SECRET: randomSecret(),
    // Every suite calls from 127.0.0.1: the address limit would make them throttle each other.
    // The throttle suite starts replicas with limits of its own.
    LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
    // Off by default (docs/audit.md); on here, so every suite runs with it as its users will.
    AUDIT_LOG_ENABLED: 'true',
    // Keycloak's events are pulled by the suite that shows them (audit-keycloak-events.test.ts):
    // every replica pulling every test realm each 30 s would load the shared Keycloak.
    AUDIT_KEYCLOAK_EVENTS_SECONDS: '0',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  };
  const config = loadConfig(env);
  const logger = createLogger(config.LOG_LEVEL);
  let keycloak: LocalKeycloak | undefined;
  let gateway: Gateway | undefined;
  try {
    keycloak = external ? undefined : await startConfiguredKeycloak(config, (m) => logger.warn(m));
    const keycloakUrl = external ?? keycloak!.url;
    gateway = await startGateway(config, keycloakUrl, logger);
    const provided: TestEnv = {
      publicUrl: config.PUBLIC_URL,
      adminUrl: config.ADMIN_PUBLIC_URL,
      keycloakUrl,
      keycloakAdminUsername: config.KEYCLOAK_ADMIN_USERNAME,
      keycloakAdminPassword: config.KEYCLOAK_ADMIN_PASSWORD!,
      gatewayClientSecret: config.KEYCLOAK_CLIENT_SECRET!,
      databaseUrl: config.DATABASE_URL!,
      redisUrl: config.REDIS_URL!,
      redisKeyPrefix: config.REDIS_KEY_PREFIX,
    };
    project.provide('testEnv', provided);
  } catch (err) {
    await gateway?.close();
    await keycloak?.stop();
    throw err;
  }
  return async () => {
    await gateway?.close();
    await keycloak?.stop();
  };
}

function randomSecret(): string {
  return randomBytes(24).toString('base64url');
}
