import type { Request } from 'express';
import { z } from 'zod';
import { routeFor } from '../http/route-table.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { realmName } from '../tenancy/id-schemas.ts';
import { pathIds } from './path-ids.ts';
import type { SigningKeysService } from './signing-keys.service.ts';

const route = routeFor<SigningKeysService>();

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
  'others fetch as the message reaches them. Keycloak unreachable: 503, the last good set stays.';

/** `POST .../signing-keys/refresh` of realm master, or of an organization's realm. */
function refresh(realm: 'master' | 'organization') {
  const isMaster = realm === 'master';
  const realmOf = (req: Request) => (isMaster ? MASTER_REALM : String(req.params.organization_id));
  return route({
    method: 'post',
    path: isMaster
      ? '/api/platform/signing-keys/refresh'
      : '/api/platform/organizations/{organization_id}/signing-keys/refresh',
    operationId: isMaster ? 'refreshSigningKeysMaster' : 'refreshSigningKeysOrganization',
    summary: `Refresh the signing keys of ${isMaster ? 'realm master' : "an organization's realm"}`,
    description: DESCRIPTION,
    tags: ['tokens'],
    ...(!isMaster && {
      params: { organization_id: pathIds.organization_id },
      errors: ['organizationNotFound' as const],
    }),
    data: signingKeySet,
    audit: { action: 'signing_keys.refresh', target: (req) => ({ realm: realmOf(req) }) },
    handler: (service, _input, req) => service.refreshSigningKeys(realmOf(req)),
  });
}

/** The operators' forced key-set refresh (see auth/bearer/jwks.ts for the schedule it overtakes). */
export const signingKeysRoutes = [refresh('master'), refresh('organization')];
