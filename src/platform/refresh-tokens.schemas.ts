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
    expire_timestamp: timestamp,
  })
  .meta({
    id: 'RefreshToken',
    description:
      'A refresh token of the caller (spec 2.3). Expiry is the earlier of start + offline max ' +
      'lifespan (when enabled) and last access + offline idle timeout.',
  });

export type RefreshTokenRecord = z.output<typeof refreshTokenRecord>;
