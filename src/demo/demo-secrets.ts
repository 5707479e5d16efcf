import { randomBytes, randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Secrets demo mode generates once and reuses, so a second start finds everything working. */
export interface DemoSecrets {
  keycloakAdminPassword: string;
  keycloakClientSecret: string;
  demoPassword: string;
  /** Keycloak's raw OTP secret of `demo-otp` (what authenticator apps get is its base32 form). */
  otpSecret: string;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomAlphanumeric(length: number): string {
  return Array.from({ length }, () => ALPHANUMERIC[randomInt(ALPHANUMERIC.length)]).join('');
}

/**
 * Reads `<dataDir>/demo-secrets.json`, creating it (mode 0600) on first use. Demo mode only:
 * outside it, every secret comes from the environment and nothing is written.
 */
export async function loadOrCreateDemoSecrets(dataDir: string): Promise<DemoSecrets> {
  const file = path.join(dataDir, 'demo-secrets.json');
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as DemoSecrets;
  const secrets: DemoSecrets = {
    keycloakAdminPassword: randomBytes(18).toString('base64url'),
    keycloakClientSecret: randomBytes(24).toString('base64url'),
    demoPassword: randomAlphanumeric(16),
    otpSecret: randomAlphanumeric(20),
  };
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600, flag: 'wx' });
  return secrets;
}
