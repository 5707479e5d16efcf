import { readFile } from 'node:fs/promises';
import type RealmRepresentation from '@keycloak/keycloak-admin-client/lib/defs/realmRepresentation.js';
import type { KeycloakAdmin } from './admin-client.ts';

const MASTER_REALM_EXPORT = new URL('../../realm-export/master.json', import.meta.url);

/** The realm fields that make up Keycloak's brute-force detection. */
const BRUTE_FORCE_FIELDS = [
  'bruteForceProtected',
  'permanentLockout',
  'failureFactor',
  'waitIncrementSeconds',
  'maxFailureWaitSeconds',
  'maxDeltaTimeSeconds',
  'quickLoginCheckMilliSeconds',
  'minimumQuickLoginWaitSeconds',
] as const;

export type BruteForceSettings = Required<
  Pick<RealmRepresentation, (typeof BRUTE_FORCE_FIELDS)[number]>
>;

/** What `protectRealms` did to one realm. */
export interface RealmProtection {
  realm: string;
  /** True when brute-force detection was off and has just been turned on. */
  changed: boolean;
}

/**
 * The brute-force settings realmgate ships, read from `realm-export/master.json` (the
 * organization template carries the same values), so that there is one source.
 */
export async function shippedBruteForceSettings(): Promise<BruteForceSettings> {
  const realm = JSON.parse(await readFile(MASTER_REALM_EXPORT, 'utf8')) as Record<string, unknown>;
  const settings: Record<string, unknown> = {};
  for (const field of BRUTE_FORCE_FIELDS) {
    const expected =
      field === 'bruteForceProtected' || field === 'permanentLockout' ? 'boolean' : 'number';
    if (typeof realm[field] !== expected) {
      throw new Error(`realm-export/master.json lacks brute-force setting ${field}`);
    }
    settings[field] = realm[field];
  }
  if (settings.bruteForceProtected !== true || settings.permanentLockout !== false) {
    throw new Error('realm-export/master.json must ship a temporary brute-force lockout');
  }
  return settings as unknown as BruteForceSettings;
}

/**
 * Turns brute-force detection on, with the shipped settings, in every realm of Keycloak where
 * it is off; a realm where it is on keeps its own settings. Safe to repeat. Realms that existed
 * before realmgate shipped these settings are not re-imported, so this brings them in step.
 */
export async function protectRealms(admin: KeycloakAdmin): Promise<RealmProtection[]> {
  const settings = await shippedBruteForceSettings();
  const results: RealmProtection[] = [];
  for (const { realm } of await admin.realms.find()) {
    if (!realm) continue;
    // Read one at a time: the list may be brief, and the realm may have changed since.
    const current = await admin.realms.findOne({ realm });
    if (!current || current.bruteForceProtected === true) {
      results.push({ realm, changed: false });
      continue;
    }
    // A partial representation: Keycloak updates only the fields it carries.
    await admin.realms.update({ realm }, settings);
    results.push({ realm, changed: true });
  }
  return results;
}
