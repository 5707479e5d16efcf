import type { RequestHandler, Response } from 'express';
import { AppError } from '../envelope/errors.ts';
import { isOrganizationId } from '../keycloak/identifiers.ts';
import type { OrganizationDirectory } from '../platform/organization-directory.ts';

/** The realm of administrators, reached through `/api/platform/...`. */
export const MASTER_REALM = 'master';

/**
 * Chooses the realm from the path: `/api/platform/...` is `master`, `/api/<org>/...` is `<org>`.
 * An organization id that is malformed or unknown answers 404 `404-00001`, before any
 * credential is looked at, so no path can name a realm that is not an organization.
 */
export function routeRealm(organizations: OrganizationDirectory): RequestHandler {
  return async (req, res, next) => {
    const first = req.path.split('/')[1] ?? '';
    if (first === 'platform') {
      res.locals.realm = MASTER_REALM;
      next();
      return;
    }
    try {
      await assertOrganization(first, organizations);
    } catch (err) {
      next(err);
      return;
    }
    res.locals.realm = first;
    next();
  };
}

/** Throws 404 `404-00001` unless `id` is a well-formed id of an existing organization. */
export async function assertOrganization(
  id: string,
  organizations: OrganizationDirectory,
): Promise<void> {
  if (!isOrganizationId(id) || !(await organizations.exists(id))) {
    throw new AppError('organizationNotFound');
  }
}

/** The realm `routeRealm` chose for this request. */
export function realmOf(res: Response): string {
  const realm = res.locals.realm as string | undefined;
  if (!realm) throw new Error('realmOf called before routeRealm');
  return realm;
}
