import { z } from 'zod';
import { organizationId, realmName, workspaceId } from '../tenancy/id-schemas.ts';
import { freeText, oneLine, OTP_SECRET, OTP_SECRET_RULE } from './user-input.ts';

/**
 * The provisioning API's bodies, one rule per field. Every string must be storable as it is
 * (PostgreSQL text holds no NUL) and every id must fit its alphabet before any database or
 * Keycloak call; a body that breaks a rule is 400 `400-00002`.
 *
 * The API description is generated from these schemas (`src/api/openapi-routes.ts`), so
 * every rule is a check JSON Schema can carry (length, pattern, bound), never a `.refine`.
 * `.meta({ id })` names the component the document shows. Lengths count UTF-16 code units, as
 * JavaScript does; JSON Schema counts code points, which differs only beyond U+FFFF.
 */

export { organizationId, workspaceId };

export const organizationBody = z
  .strictObject({ id: organizationId, name: oneLine(255) })
  .meta({ id: 'OrganizationCreate' });

export const workspaceBody = z
  .strictObject({
    id: workspaceId,
    name: oneLine(255),
    description: freeText(4000).optional(),
    environments: z.array(oneLine(255)).max(100).optional(),
  })
  .meta({ id: 'WorkspaceCreate' });

// Keycloak applies its own username rules and password policy after these.
const userFields = {
  username: oneLine(255),
  password: oneLine(1024).meta({ format: 'password', writeOnly: true }),
  otp_secret: oneLine(512)
    .regex(OTP_SECRET, OTP_SECRET_RULE)
    .optional()
    .meta({
      writeOnly: true,
      description:
        'Base32 TOTP secret as an authenticator app shows it (either case, spaces, dashes and ' +
        '`=` padding allowed); the user must then log in with `totp` (Bearer only).',
    }),
};

export const masterUserBody = z.strictObject(userFields).meta({ id: 'UserCreate' });

export const organizationUserBody = z
  .strictObject({
    ...userFields,
    workspaces: z
      .array(workspaceId)
      .max(1000)
      .optional()
      .meta({ description: 'Workspaces the user gets role `<ws>` on.' }),
  })
  .meta({ id: 'OrganizationUserCreate' });

/**
 * A time PostgreSQL can store and the answer can show as sent, RFC 3339 in milliseconds: no
 * year 0000 (PostgreSQL has none), nor a positive offset on 0001-01-01 or a negative one on
 * 9999-12-31 (the instant could fall in year 0 or 10000), an offset of at most 15:59
 * (PostgreSQL's limit; ISO 8601 syntax allows up to 23:59), and at most three fraction digits
 * (PostgreSQL would round finer ones, 9999-12-31T23:59:59.9999999Z into year 10000, and refuse
 * a text over 128 characters).
 */
const storableTime = z.iso
  .datetime({ offset: true })
  .regex(
    /^(?!0000-)(?!0001-01-01T.*\+\d\d:\d\d$)(?!9999-12-31T.*-\d\d:\d\d$)[^.]*(?:\.\d{1,3})?(?:Z|[+-](?:0\d|1[0-5]):\d\d)$/,
    'must be a time from year 0001 to 9999 UTC, in milliseconds at most, with an offset of at most 15:59',
  )
  // A second pattern moves both into `allOf`, where zod leaves the format out.
  .meta({ format: 'date-time' });

export const operationBody = z
  .strictObject({
    operation_name: oneLine(255),
    scheduled_date_for_execution: storableTime.nullable().optional(),
    environment: oneLine(255).nullable().optional(),
    remarks: freeText(4000).nullable().optional(),
  })
  .meta({ id: 'OperationCreate' });

/**
 * A created user as provisioning answers it, never with its password or OTP secret: the
 * service's result type and the API description's `User` both come from here.
 */
export const provisionedUser = z
  .strictObject({
    id: z.string(),
    username: z.string(),
    realm: realmName,
    /** Every workspace the user has a role on. */
    workspaces: z.array(workspaceId),
  })
  .meta({ id: 'User' });

export type ProvisionedUser = z.output<typeof provisionedUser>;
