import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { loadConfig, ConfigError, type Config } from './config/config.ts';
import { loadOrCreateDemoSecrets, type DemoSecrets } from './demo/demo-secrets.ts';
import { printDemoWelcome } from './demo/welcome.ts';
import { seedDemo } from './demo/seed-demo.ts';
import { startGateway, type Gateway } from './gateway.ts';
import { createLogger } from './http/logger.ts';
import { loginAsBootstrapAdmin } from './keycloak/admin-client.ts';
import { startConfiguredKeycloak } from './keycloak/local-keycloak.ts';

/**
 * `node src/main.ts [--demo]` on Node 24, which strips the types: validate the configuration,
 * start a local Keycloak unless KEYCLOAK_URL names one (or the nodes of one), start the gateway, and in demo mode
 * create the demo data.
 */
async function main(): Promise<void> {
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

  let keycloak: LocalKeycloak | undefined;
  let gateway: Gateway | undefined;
  let stopping = false;
  // The first signal drains (see Gateway.close); a second one means "now".
  const stop = async (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, graceSeconds: config.SHUTDOWN_GRACE_SECONDS }, 'shutting down');
    await gateway?.close().catch((err: unknown) => logger.error({ err }, 'gateway close failed'));
    await keycloak?.stop();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  try {
    keycloak = config.KEYCLOAK_URL ? undefined : await startConfiguredKeycloak(config, say);
    const keycloakUrl = config.KEYCLOAK_URL ?? keycloak!.url;
    gateway = await startGateway(config, keycloakUrl, logger);
    logger.info(
      { public: config.PUBLIC_URL, admin: config.ADMIN_PUBLIC_URL },
      'realmgate is listening',
    );
    if (demo && secrets) await startDemo(config, keycloakUrl, gateway, secrets);
  } catch (err) {
    logger.fatal({ err }, 'start failed');
    await gateway?.close().catch(() => undefined);
    await keycloak?.stop();
    process.exit(1);
  }
}

async function startDemo(
  config: Config,
  keycloakUrl: string | readonly string[],
  gateway: Gateway,
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
    db: gateway.db,
    gatewayClientSecret: config.KEYCLOAK_CLIENT_SECRET!,
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
