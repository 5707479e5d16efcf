import type { RequestHandler } from 'express';
import { realmOf } from './auth-routes.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { isBootstrapAdmin } from '../auth/bootstrap-admin.ts';
import { sendTokenError } from './grant-answer.ts';

/**
 * The public listener's `/auth` step of the bootstrap administrator's rule (auth/bootstrap-admin.ts):
 * no form sent to the master realm (token endpoint, login pages) may name it (auth-steps.ts).
 */
export function guardBootstrapAdmin(bootstrapAdmin: string): RequestHandler {
  return (req, res, next) => {
    const form = formFieldsOf(req);
    // Any path of the realm (every entry below /auth/realms/{realm} carries the step), the
    // realm's name in any case.
    if (form && realmOf(req)?.toLowerCase() === MASTER_REALM) {
      const usernames = form.getAll('username');
      if (usernames.some((username) => isBootstrapAdmin(bootstrapAdmin, MASTER_REALM, username))) {
        // Keycloak's own answer to a refused grant, so clients need no new case.
        sendTokenError(res, {
          status: 400,
          error: 'invalid_grant',
          description: 'This account signs in on the admin listener only.',
        });
        return;
      }
    }
    next();
  };
}
