import { z } from 'zod';
import { ONE_LINE } from './user-input.ts';

/**
 * The user-lifecycle API's inputs (see users.router.ts). Like provisioning.schemas.ts, every
 * rule is one JSON Schema can carry, so the API description is generated from these.
 */

/** A count in a query string: digits only (no sign, no exponent, no spaces). */
const count = (max: number) =>
  z
    .string()
    .regex(/^[0-9]{1,10}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(0).max(max));

export const MAX_PAGE = 1000;
const MAX_FIRST = 1_000_000_000;

export const userListQuery = z.strictObject({
  first: count(MAX_FIRST).default(0),
  max: count(MAX_PAGE).pipe(z.number().min(1)).default(100),
  search: z
    .string()
    .min(1)
    .max(255)
    .regex(ONE_LINE, 'must not contain control characters')
    .optional(),
});

export type UserListQuery = z.output<typeof userListQuery>;

export const passwordBody = z
  .strictObject({
    password: z
      .string()
      .min(1)
      .max(1024)
      .regex(ONE_LINE, 'must not contain control characters')
      .meta({ format: 'password', writeOnly: true }),
  })
  .meta({ id: 'PasswordReset' });
