import { inject } from 'vitest';

/** What the global setup started, as seen by every integration test. */
export interface TestEnv {
  publicUrl: string;
  adminUrl: string;
  keycloakUrl: string;
  keycloakAdminUsername: string;
  keycloakAdminPassword: string;
  gatewayClientSecret: string;
  databaseUrl: string;
  redisUrl: string;
  redisKeyPrefix: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    testEnv: TestEnv;
  }
}

/** The running test stack (see global-setup.ts). */
export function testEnv(): TestEnv {
  return inject('testEnv');
}
