import type { RequestHandler } from 'express';
import { realmOf } from './auth-routes.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

/**
 * Keycloak's bootstrap administrator is its break-glass account, and the session provisioning
 * runs on. With brute-force detection on, anyone who may try its password may also lock it
 * (two bad tries a second do), which would stop provisioning and lock the administrators out of
 * the console. So the public listener never lets anyone try it: no form sent to the master
 * realm (token endpoint, login pages) may name it, and Basic on the API refuses it (see
 * basic-authenticator.ts). It logs in on the admin listener, and its tokens work everywhere.
 */
export function isBootstrapAdmin(bootstrapAdmin: string, realm: string, username: string): boolean {
  return realm === MASTER_REALM && username.trim().toLowerCase() === bootstrapAdmin.toLowerCase();
}

/** The public listener's `/auth` step of the rule above (auth-steps.ts). */
export function guardBootstrapAdmin(bootstrapAdmin: string): RequestHandler {
  return (req, res, next) => {
    const form = formFieldsOf(req);
    // Any path of the realm (every entry below /auth/realms/{realm} carries the step), the
    // realm's name in any case.
    if (form && realmOf(req)?.toLowerCase() === MASTER_REALM) {
      const usernames = form.getAll('username');
      if (usernames.some((username) => isBootstrapAdmin(bootstrapAdmin, MASTER_REALM, username))) {
        // Keycloak's own answer to a refused grant, so clients need no new case.
        res.status(400).json({
          error: 'invalid_grant',
          error_description: 'This account signs in on the admin listener only.',
        });
        return;
      }
    }
    next();
  };
}
