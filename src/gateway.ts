import type { Server } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { createApp } from './app.ts';
import { createCache, type Cache } from './cache/index.ts';
import type { Config } from './config/config.ts';
import { checkDatabase, openDatabase } from './db/database.ts';
import { migrateToLatest } from './db/migrate.ts';
import { checkKeycloak } from './keycloak/keycloak-health.ts';
import { closeServer, listen } from './server.ts';

export interface Gateway {
  readonly publicServer: Server;
  readonly adminServer: Server;
  readonly db: Knex;
  readonly cache: Cache;
  close(): Promise<void>;
}

/**
 * Opens storage (migrating it), builds both listeners and starts them. `keycloakUrl` is the
 * Keycloak the gateway talks to, local or external.
 */
export async function startGateway(
  config: Config,
  keycloakUrl: string,
  logger: Logger,
): Promise<Gateway> {
  const db = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  await migrateToLatest(db);
  const cache = createCache({
    redisUrl: config.REDIS_URL,
    keyPrefix: config.REDIS_KEY_PREFIX,
    maxEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    commandTimeoutMs: 1000,
  });
  const deps = {
    logger,
    keycloakUrl,
    publicUrl: config.PUBLIC_URL,
    keycloakTimeoutMs: config.KEYCLOAK_TIMEOUT_MS,
    authProxyTimeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
    readiness: {
      keycloak: () => checkKeycloak(keycloakUrl, config.KEYCLOAK_TIMEOUT_MS),
      database: () => checkDatabase(db),
      cache: () => cache.ping(),
    },
  };
  const publicServer = await listen(createApp(deps, 'public'), config.HOST, config.PORT);
  const adminServer = await listen(createApp(deps, 'admin'), config.ADMIN_HOST, config.ADMIN_PORT);
  return {
    publicServer,
    adminServer,
    db,
    cache,
    async close() {
      await Promise.all([closeServer(publicServer), closeServer(adminServer)]);
      await cache.close();
      await db.destroy();
    },
  };
}
