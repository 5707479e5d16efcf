import cluster from 'node:cluster';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { createIpcPeer, type IpcEndpoint } from './cache/ipc-peer.ts';
import { databaseTimeoutsOf, openDatabase } from './db/database.ts';
import { migrateAtStart, type SchemaState } from './db/migrate-at-start.ts';
import { loadConfig, ConfigError, type Config } from './config/config.ts';
import { loadOrCreateDemoSecrets, type DemoSecrets } from './demo/demo-secrets.ts';
import { printDemoWelcome } from './demo/welcome.ts';
import { seedDemo } from './demo/seed-demo.ts';
import { startGateway, type Gateway } from './gateway.ts';
import { backchannelLogoutUrlOf } from './auth-proxy/backchannel-logout.ts';
import { createLogger } from './http/logger.ts';
import { loginAsBootstrapAdmin } from './keycloak/admin-client.ts';
import { buildInfo } from './release/build-info.ts';
import { startConfiguredKeycloak } from './keycloak/local-keycloak.ts';
import { superviseWorkers, WORKER_ID_VARIABLE, type Supervisor } from './supervisor.ts';

/**
 * `node src/main.ts [--demo]` on Node 24, which strips the types: validate the configuration,
 * start a local Keycloak unless KEYCLOAK_URL names one (or the nodes of one), start the gateway
 * (in this process, or with WORKERS > 1 in worker processes under this one), and in demo mode
 * create the demo data.
 */
async function main(): Promise<void> {
  if (cluster.isWorker) return runWorker();
  const demo =
    process.argv.includes('--demo') || /^(1|true|yes)$/.test(process.env.REALMGATE_DEMO ?? '');
  const env: Record<string, string | undefined> = { ...process.env };
  let secrets: DemoSecrets | undefined;
  if (demo) {
    secrets = await loadOrCreateDemoSecrets(env.DATA_DIR || '.data');
    env.REALMGATE_DEMO = 'true';
    // A secret given, in the environment or as a file (`<NAME>_FILE`), wins over the generated one.
    if (!env.KEYCLOAK_ADMIN_PASSWORD && !env.KEYCLOAK_ADMIN_PASSWORD_FILE) {
      env.KEYCLOAK_ADMIN_PASSWORD = secrets.keycloakAdminPassword;
    }
    if (!env.KEYCLOAK_CLIENT_SECRET && !env.KEYCLOAK_CLIENT_SECRET_FILE) {
      env.KEYCLOAK_CLIENT_SECRET = secrets.keycloakClientSecret;
    }
  }
  const config = loadConfig(env);
  const logger = createLogger(config.LOG_LEVEL);
  const say = (message: string) => logger.info(message);
  // First, so that whatever follows (a refused migration, say) is read against the version.
  const build = buildInfo();
  logger.info(build, `realmgate ${build.version} starting`);

  let keycloak: LocalKeycloak | undefined;
  let gateway: Gateway | undefined;
  let workers: Supervisor | undefined;
  // The supervising process's migration, in the background when PostgreSQL was unreachable.
  let schema: SchemaState | undefined;
  let stopping = false;
  // The embedded database (no DATABASE_URL) belongs to one process: the gateway runs in this one.
  const clustered = config.WORKERS > 1 && config.DATABASE_URL !== undefined;
  if (config.WORKERS > 1 && !clustered) {
    logger.warn("WORKERS > 1 needs DATABASE_URL (PGlite is one process's database): one process");
  }
  // The first signal drains (see Gateway.close); a second one means "now".
  const stop = async (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting at once');
      workers?.kill();
      process.exit(1);
    }
    stopping = true;
    schema?.stop();
    logger.info({ signal, graceSeconds: config.SHUTDOWN_GRACE_SECONDS }, 'shutting down');
    await gateway?.close().catch((err: unknown) => logger.error({ err }, 'gateway close failed'));
    await workers?.stop();
    await keycloak?.stop();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  // Once, however many paths see the failure (demo mode awaits the migration that a handler
  // watches too), and as a stop: a signal meanwhile exits at once, a failure later is this one.
  let failing: Promise<never> | undefined;
  const failed = (err: unknown): Promise<never> => {
    failing ??= (async () => {
      stopping = true;
      logger.fatal({ err }, 'start failed');
      schema?.stop();
      await gateway?.close().catch(() => undefined);
      await workers?.stop();
      await keycloak?.stop();
      process.exit(1);
    })();
    return failing;
  };
  // A migration in the background that fails for another reason than an unreachable database
  // fails the start, as it would have at once (a schema this release cannot run on, say).
  const failedLater = (err: unknown) => {
    if (!stopping) void failed(err);
  };

  try {
    keycloak = config.KEYCLOAK_URL ? undefined : await startConfiguredKeycloak(config, say);
    const keycloakUrl = config.KEYCLOAK_URL ?? keycloak!.url;
    if (clustered) {
      // Once, before any worker: the migration, the demo data. With PostgreSQL unreachable the
      // workers start all the same (they serve without it) and this process migrates once it
      // answers.
      const db = await openDatabase({
        databaseUrl: config.DATABASE_URL,
        dataDir: config.DATA_DIR,
        timeouts: databaseTimeoutsOf(config),
        logger,
      });
      try {
        schema = await migrateAtStart(db, logger);
      } catch (err) {
        await db.destroy();
        throw err;
      }
      const seeded = schema.ready
        .then(async () => {
          if (demo && secrets) await startDemo(config, keycloakUrl, db, secrets);
        })
        .finally(() => db.destroy());
      if (schema.current()) await seeded;
      else seeded.catch(failedLater);
      workers = await superviseWorkers({
        config,
        logger,
        schema,
        env: workerEnv(env, keycloakUrl, config),
      });
    } else {
      gateway = await startGateway(config, keycloakUrl, logger);
      gateway.schemaReady.catch(failedLater);
      if (demo && secrets) {
        await gateway.schemaReady;
        await startDemo(config, keycloakUrl, gateway.db, secrets);
      }
    }
    logger.info(
      {
        version: build.version,
        revision: build.revision,
        public: config.PUBLIC_URL,
        admin: config.ADMIN_PUBLIC_URL,
        workers: clustered ? config.WORKERS : 1,
      },
      'realmgate is listening',
    );
  } catch (err) {
    await failed(err);
  }
}

/**
 * What a worker's configuration adds to this process's: the Keycloak started here, the demo's
 * secrets, and one cache secret for all (Basic logins and throttle keys are derived from it).
 */
function workerEnv(
  env: Record<string, string | undefined>,
  keycloakUrl: string | readonly string[],
  config: Config,
): Record<string, string> {
  const defined = Object.entries(env).filter(
    (entry): entry is [string, string] => entry[1] !== undefined,
  );
  return {
    ...Object.fromEntries(defined),
    KEYCLOAK_URL: typeof keycloakUrl === 'string' ? keycloakUrl : keycloakUrl.join(','),
    // Given as a file, the workers read the same file (a setting may not be given both ways).
    ...(env.REALMGATE_CACHE_SECRET_FILE
      ? {}
      : {
          REALMGATE_CACHE_SECRET:
            config.REALMGATE_CACHE_SECRET ?? randomBytes(32).toString('base64url'),
        }),
  };
}

/**
 * One worker of a clustered gateway: the configuration its supervising process handed it, the
 * gateway with its IPC channel, the same graceful stop on SIGTERM; it stops too when the
 * supervising process is gone.
 */
async function runWorker(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger(config.LOG_LEVEL);
  const id = process.env[WORKER_ID_VARIABLE] ?? String(cluster.worker?.id);
  const peer = createIpcPeer(process as unknown as IpcEndpoint);
  let gateway: Gateway | undefined;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, worker: id }, 'worker shutting down');
    await gateway?.close().catch((err: unknown) => logger.error({ err }, 'gateway close failed'));
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('disconnect', () => void stop('disconnect'));
  try {
    gateway = await startGateway(config, config.KEYCLOAK_URL!, logger, { id, peer });
    peer.tell('worker.ready');
  } catch (err) {
    logger.fatal({ err, worker: id }, 'worker start failed');
    await gateway?.close().catch(() => undefined);
    process.exit(1);
  }
}

async function startDemo(
  config: Config,
  keycloakUrl: string | readonly string[],
  db: Knex,
  secrets: DemoSecrets,
) {
  const demoPassword = config.REALMGATE_DEMO_PASSWORD ?? secrets.demoPassword;
  const admin = await loginAsBootstrapAdmin({
    keycloakUrl,
    username: config.KEYCLOAK_ADMIN_USERNAME,
    password: config.KEYCLOAK_ADMIN_PASSWORD!,
    timeoutMs: config.KEYCLOAK_TIMEOUT_MS,
  });
  await seedDemo({
    admin,
    db,
    gatewayClientSecret: config.KEYCLOAK_CLIENT_SECRET!,
    backchannelLogoutUrl: backchannelLogoutUrlOf(config),
    demoPassword,
    otpSecret: secrets.otpSecret,
  });
  printDemoWelcome(config, {
    demoPassword,
    otpSecret: secrets.otpSecret,
    keycloakAdminPassword: config.KEYCLOAK_ADMIN_PASSWORD!,
  });
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\nSee .env.example for every variable.\n`);
  } else {
    process.stderr.write(`realmgate failed to start: ${(err as Error).stack ?? String(err)}\n`);
  }
  process.exit(1);
});
