import { z } from 'zod';
import { routeFor } from '../http/route-table.ts';
import { realmName } from '../tenancy/id-schemas.ts';
import { administeredRealms, type RealmVariant } from './path-ids.ts';
import type { SigningKeysService } from './signing-keys.service.ts';

const route = routeFor<SigningKeysService>({ metricsClass: 'provisioning' });

const signingKeySet = z
  .object({
    realm: realmName,
    key_ids: z.array(z.string()).meta({
      description: 'The `kid`s of the signature keys the answering replica now verifies with.',
    }),
  })
  .meta({ id: 'SigningKeySet' });

const DESCRIPTION =
  "Fetches the realm's key set from Keycloak now, on every replica sharing Redis (and every " +
  'worker), instead of at the next scheduled fetch (`KEY_SET_REFRESH_SECONDS`): after a ' +
  'signing key was disabled or removed in Keycloak (a leaked key), its tokens, new or already ' +
  'seen, are refused from this answer on. Answers once the answering replica has fetched; the ' +
  'others fetch as the message reaches them. Keycloak unreachable: 503, the last good set stays. ' +
  'An organization whose realm Keycloak says it does not have: 404 `404-00001`.';

/** `POST .../signing-keys/refresh` of realm master, or of an organization's realm. */
function refresh(variant: RealmVariant) {
  return route({
    method: 'post',
    path: `${variant.base}/signing-keys/refresh`,
    operationId: `refreshSigningKeys${variant.suffix}`,
    summary: `Refresh the signing keys of ${variant.name}`,
    description: DESCRIPTION,
    tags: ['tokens'],
    params: variant.params,
    errors: variant.errors,
    data: signingKeySet,
    audit: { action: 'signing_keys.refresh', target: ({ realm }) => ({ realm }) },
    handler: (service, { realm }) => service.refreshSigningKeys(realm),
  });
}

/** The operators' forced key-set refresh (see auth/bearer/jwks.ts for the schedule it overtakes). */
export const signingKeysRoutes = administeredRealms.map(refresh);
