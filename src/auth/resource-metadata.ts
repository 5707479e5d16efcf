import type { Request, Router } from 'express';
import { listenerRouter } from '../http/listener-router.ts';
import { AppError } from '../envelope/errors.ts';
import type { GoneRealms } from './gone-realms.ts';
import { createDpopSwitches, SWITCH_FRESH_MS, type DpopSwitches } from './dpop/dpop-switch.ts';
import { isOrganizationId, MASTER_REALM, realmIssuer } from '../tenancy/identifiers.ts';
import type { OrganizationLookup } from '../tenancy/organization-state.ts';
import type { Clock } from '../time/clock.ts';

/**
 * Where a protected resource's metadata is (RFC 9728 section 3.1): this path, then the
 * resource's own path: `/.well-known/oauth-protected-resource/api/<org>` describes `/api/<org>`.
 */
export const RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';

/** The segment after `/api` that names realm master (the platform API). */
const PLATFORM = 'platform';

/** What a client learns of a resource (RFC 9728 section 2, and RFC 9449 section 5.1). */
export interface ResourceMetadata {
  /** The resource's identifier: the URL its proofs name, under `PUBLIC_URL`. */
  resource: string;
  /** The realm's issuer: the one authorization server whose tokens the resource takes. */
  authorization_servers: string[];
  dpop_signing_alg_values_supported: string[];
  /** The realm's API client requires DPoP (an organization's switch): every token is bound. */
  dpop_bound_access_tokens_required: boolean;
  /** Credentials travel in the Authorization header only. */
  bearer_methods_supported: ['header'];
}

/**
 * Where the router reads the DPoP switches: the memory the admission shares, or one of its own
 * made from Keycloak's admin API (`dpopRequired`) and the shared memory of gone realms.
 */
type SwitchSource =
  | { switches: DpopSwitches }
  | {
      /** Whether the realm's API client requires DPoP (Keycloak's admin API). */
      dpopRequired: (realm: string) => Promise<boolean>;
      /** The realms Keycloak said it does not have (gone-realms.ts), as Basic and Bearer know them. */
      gone: GoneRealms;
      clock?: Clock;
    };

/**
 * One resource the gateway describes, declared once: the express route and the OpenAPI path
 * are both made from this list (`resourceMetadataRouter`, api/openapi.ts).
 */
export interface ResourceMetadataRoute {
  /** OpenAPI style; a `{organization_id}` is read from the path. */
  path: string;
  summary: string;
}

export const RESOURCE_METADATA_ROUTES: readonly ResourceMetadataRoute[] = [
  {
    path: RESOURCE_METADATA_PATH,
    summary: 'The gateway as a protected resource (RFC 9728): its platform API, realm master',
  },
  {
    path: `${RESOURCE_METADATA_PATH}/api/${PLATFORM}`,
    summary: 'The platform API (`/api/platform`) as a protected resource (RFC 9728)',
  },
  {
    path: `${RESOURCE_METADATA_PATH}/api/{organization_id}`,
    summary: "An organization's API (`/api/<org>`) as a protected resource (RFC 9728)",
  },
];

/**
 * The URL of the metadata of the resource a request's realm is served under (`/api/platform`
 * for master, `/api/<org>`): what a 401 challenge names in `resource_metadata`.
 */
export function resourceMetadataUrlOf(htuBase: string, realm: string): string {
  return `${htuBase}${RESOURCE_METADATA_PATH}/api/${apiSegmentOf(realm)}`;
}

function apiSegmentOf(realm: string): string {
  return realm === MASTER_REALM ? PLATFORM : realm;
}

/**
 * The metadata of each resource, at the paths of RESOURCE_METADATA_ROUTES, public (no
 * credentials: a client reads it before it has a token). Only an organization that exists and
 * is enabled is described (others: 404, as its API answers; 404 too when its realm is gone in
 * Keycloak, which no retry changes); its switch is read from the memory the admission enforces
 * it from (dpop-switch.ts): asked of Keycloak at most once a minute per realm, whatever the
 * traffic, the last answer kept through an outage (one never read: 503), a realm gone told to
 * and read from the memory the other paths share.
 */
export function resourceMetadataRouter(
  options: {
    /** `htuBaseOf(PUBLIC_URL)`. */
    htuBase: string;
    algorithms: readonly string[];
    organizations: OrganizationLookup;
    /** The client's address, whose share of the directory's lookups an unknown id spends. */
    clientAddressOf: (req: Request) => string;
  } & SwitchSource,
): Router {
  const { htuBase } = options;
  const switches =
    'switches' in options
      ? options.switches
      : createDpopSwitches({
          read: options.dpopRequired,
          gone: options.gone,
          clock: options.clock,
        });

  async function dpopRequired(realm: string): Promise<boolean> {
    return switches.requiredIn(realm);
  }

  async function metadataOf(realm: string, resourcePath: string): Promise<ResourceMetadata> {
    return {
      resource: `${htuBase}${resourcePath}`,
      authorization_servers: [realmIssuer(htuBase, realm)],
      dpop_signing_alg_values_supported: [...options.algorithms],
      dpop_bound_access_tokens_required: await dpopRequired(realm),
      bearer_methods_supported: ['header'],
    };
  }

  async function realmOf(req: Request): Promise<string> {
    const segment = req.params.organization_id;
    if (typeof segment !== 'string' || segment === PLATFORM) return MASTER_REALM;
    if (!isOrganizationId(segment)) throw new AppError('organizationNotFound');
    const state = await options.organizations.stateOf(segment, options.clientAddressOf(req));
    if (state === 'absent') throw new AppError('organizationNotFound');
    if (state === 'disabled') throw new AppError('organizationDisabled');
    return segment;
  }

  // Strict: RFC 9728 3.3 has metadata name the URL it was fetched from, and
  // `.../api/platform/` would name another resource.
  const router = listenerRouter({ strict: true });
  for (const route of RESOURCE_METADATA_ROUTES) {
    // RFC 9728 section 3.3: the resource is the path the metadata's own path names after the
    // well-known part (none: the gateway's root).
    const resourceTemplate = route.path.slice(RESOURCE_METADATA_PATH.length);
    router.get(route.path.replace('{organization_id}', ':organization_id'), (req, res, next) => {
      realmOf(req)
        .then((realm) =>
          metadataOf(realm, resourceTemplate.replace('{organization_id}', apiSegmentOf(realm))),
        )
        .then((metadata) => {
          // Public, and the same for every client: a cache may keep it as long as the switch.
          res.setHeader('cache-control', `public, max-age=${SWITCH_FRESH_MS / 1000}`);
          res.json(metadata);
        })
        .catch(next);
    });
  }
  return router;
}
