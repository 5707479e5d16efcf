import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { accountNameOf } from './account-name.ts';

/**
 * Keycloak's bootstrap administrator is its break-glass account, and the session provisioning
 * runs on. With brute-force detection on, anyone who may try its password may also lock it
 * (two bad tries a second do), which would stop provisioning and lock the administrators out of
 * the console. So the public listener never lets anyone try it: no form sent to the master
 * realm (token endpoint, login pages) may name it, and Basic on the API refuses it (see
 * basic-authenticator.ts). It logs in on the admin listener, and its tokens work everywhere.
 */
export function isBootstrapAdmin(bootstrapAdmin: string, realm: string, username: string): boolean {
  return realm === MASTER_REALM && accountNameOf(username) === bootstrapAdmin.toLowerCase();
}
