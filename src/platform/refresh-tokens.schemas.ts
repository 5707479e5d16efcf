import { z } from 'zod';
import { timestamp } from '../envelope/envelope.schemas.ts';

/**
 * One refresh token (a Keycloak offline session) as spec 2.3 shows it: the answer's type and
 * the API description's `RefreshToken` both come from here.
 */
export const refreshTokenRecord = z
  .strictObject({
    id: z.string().meta({ description: 'Keycloak offline session id.' }),
    start_timestamp: timestamp,
    lastaccess_timestamp: timestamp,
    expire_timestamp: timestamp.meta({
      description: "The earlier of Keycloak's expiry and the lifetime given at issuance.",
    }),
    name: z.string().nullable().meta({ description: 'Given at issuance (`realmgate_name`).' }),
    workspaces: z.array(z.string()).nullable().meta({
      description:
        'The workspaces it reaches (`realmgate_workspaces`); null: every workspace of the user.',
    }),
    read_only: z.boolean().meta({ description: 'Safe methods only (`realmgate_read_only`).' }),
    dpop_jkt: z
      .string()
      .nullable()
      .meta({
        description:
          'The JWK SHA-256 thumbprint (RFC 7638) of the key its tokens are bound to (DPoP, ' +
          "RFC 9449: the access tokens' `cnf.jkt`): it is refused without a proof of that key. " +
          'Null: a bearer token, which works for whoever holds a copy.',
      }),
    last_use: z
      .strictObject({
        timestamp,
        client_address: z.string(),
        user_agent: z.string().nullable(),
      })
      .nullable()
      .meta({
        description:
          'Its last refresh grant or API call as the gateway saw it (noted at most once a ' +
          'minute); null: none since the gateway began noting them.',
      }),
  })
  .meta({
    id: 'RefreshToken',
    description:
      'A refresh token of the caller (spec 2.3, and what was given it at issuance). Expiry is ' +
      'the earliest of start + offline max lifespan (when enabled), last access + offline idle ' +
      'timeout, and the lifetime given at issuance.',
  });

export type RefreshTokenRecord = z.output<typeof refreshTokenRecord>;
