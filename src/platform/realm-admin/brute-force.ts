import { readFile } from 'node:fs/promises';
import type RealmRepresentation from '@keycloak/keycloak-admin-client/lib/defs/realmRepresentation.js';
import { z } from 'zod';
import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { realmName } from '../../tenancy/id-schemas.ts';

const MASTER_REALM_EXPORT = new URL('../../../realm-export/master.json', import.meta.url);

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

/**
 * The settings realmgate shipped before its login throttle counted per account and address:
 * ten failures at any pace, two within a second, locked the account for everyone. A realm still
 * on exactly these is brought to today's settings; one an operator tuned keeps its own.
 */
const EARLIER_SHIPPED: BruteForceSettings = {
  bruteForceProtected: true,
  permanentLockout: false,
  failureFactor: 10,
  waitIncrementSeconds: 60,
  maxFailureWaitSeconds: 900,
  maxDeltaTimeSeconds: 43200,
  quickLoginCheckMilliSeconds: 1000,
  minimumQuickLoginWaitSeconds: 60,
};

/**
 * What `protectRealms` did to one realm: its answer type and the API description's
 * `RealmProtection` both come from here.
 */
export const realmProtection = z
  .strictObject({
    realm: realmName,
    changed: z.boolean().meta({
      description:
        'True when brute-force detection was off, or on with the settings realmgate shipped ' +
        'earlier, and has just been given today’s.',
    }),
  })
  .meta({ id: 'RealmProtection' });

export type RealmProtection = z.output<typeof realmProtection>;

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
 * it is off or still has the settings realmgate shipped earlier; a realm with settings of its
 * own keeps them. Safe to repeat. Realms that existed before realmgate shipped these settings
 * are not re-imported, so this brings them in step.
 */
export async function protectRealms(admin: KeycloakAdmin): Promise<RealmProtection[]> {
  const settings = await shippedBruteForceSettings();
  const results: RealmProtection[] = [];
  for (const { realm } of await admin.realms.find()) {
    if (!realm) continue;
    // Read one at a time: the list may be brief, and the realm may have changed since.
    const current = await admin.realms.findOne({ realm });
    const outdated = BRUTE_FORCE_FIELDS.every(
      (field) => current?.[field] === EARLIER_SHIPPED[field],
    );
    if (!current || (current.bruteForceProtected === true && !outdated)) {
      results.push({ realm, changed: false });
      continue;
    }
    // A partial representation: Keycloak updates only the fields it carries.
    await admin.realms.update({ realm }, settings);
    results.push({ realm, changed: true });
  }
  return results;
}
