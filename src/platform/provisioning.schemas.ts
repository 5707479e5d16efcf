import { z } from 'zod';
import { isOrganizationId, isWorkspaceId } from '../keycloak/identifiers.ts';
import { isFreeText, isOneLine } from './user-input.ts';

/**
 * The provisioning API's bodies, one rule per field. Every string must be storable as it is
 * (PostgreSQL text holds no NUL) and every id must fit its alphabet before any database or
 * Keycloak call; a body that breaks a rule is 400 `400-00002`.
 */

/** One line of printable text, as names and labels are shown in lists and logs. */
const oneLine = (max: number, min = 1) =>
  z.string().min(min).max(max).refine(isOneLine, 'must not contain control characters');

/** Several lines of text: tabs and line breaks allowed, other control characters not. */
const freeText = (max: number) =>
  z
    .string()
    .max(max)
    .refine(isFreeText, 'must not contain control characters other than tab and line breaks');

const organizationId = z
  .string()
  .refine(isOrganizationId, 'must be a-z, 0-9, - or _, start with a letter, at most 36 long');

const workspaceId = z
  .string()
  .refine(isWorkspaceId, 'must be A-Z, a-z, 0-9, - or _, start with a letter or digit, at most 36');

export const organizationBody = z.strictObject({ id: organizationId, name: oneLine(255) });

export const workspaceBody = z.strictObject({
  id: workspaceId,
  name: oneLine(255),
  description: freeText(4000).optional(),
  environments: z.array(oneLine(255)).max(100).optional(),
});

// Keycloak applies its own username rules and password policy after these.
const userFields = {
  username: oneLine(255),
  password: oneLine(1024),
  otp_secret: oneLine(512).optional(),
};

export const masterUserBody = z.strictObject(userFields);

export const organizationUserBody = z.strictObject({
  ...userFields,
  workspaces: z.array(workspaceId).max(1000).optional(),
});

export const operationBody = z.strictObject({
  operation_name: oneLine(255),
  scheduled_date_for_execution: z.iso.datetime({ offset: true }).nullable().optional(),
  environment: oneLine(255).nullable().optional(),
  remarks: freeText(4000).nullable().optional(),
});
