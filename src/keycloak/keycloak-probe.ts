import { MASTER_REALM } from '../tenancy/identifiers.ts';

/**
 * Keycloak is usable when the master realm's public description answers. This works for a
 * local Keycloak and for any external one, whose management port we may not reach.
 */
export async function checkKeycloak(keycloakUrl: string, timeoutMs: number): Promise<void> {
  const res = await fetch(`${keycloakUrl}/realms/${MASTER_REALM}`, {
    signal: AbortSignal.timeout(timeoutMs),
  });
  await res.body?.cancel();
  if (res.status !== 200) throw new Error(`Keycloak answered ${res.status}`);
}
