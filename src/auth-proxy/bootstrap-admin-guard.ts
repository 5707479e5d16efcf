import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { realmOf } from './auth-routes.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { isBootstrapAdmin } from '../auth/bootstrap-admin.ts';
import type { LoginAccounts } from '../auth/login-accounts.ts';
import { sendTokenError } from './grant-answer.ts';

export interface BootstrapAdminGuardDeps {
  bootstrapAdmin: string;
  /** Tells the account an e-mail logs in to: Keycloak takes it for the user name. */
  accounts: LoginAccounts;
  clientAddress: (req: IncomingMessage) => string;
}

/**
 * The public listener's `/auth` step of the bootstrap administrator's rule (auth/bootstrap-admin.ts):
 * no form sent to the master realm (token endpoint, login pages) may name it (auth-steps.ts), by
 * its user name or by an e-mail an operator gave it.
 */
export function guardBootstrapAdmin(deps: BootstrapAdminGuardDeps): RequestHandler {
  const namesAdmin = (username: string) =>
    isBootstrapAdmin(deps.bootstrapAdmin, MASTER_REALM, username);
  return (req, res, next) => {
    const form = formFieldsOf(req);
    // Any path of the realm (every entry below /auth/realms/{realm} carries the step), the
    // realm's name in any case.
    if (!form || realmOf(req)?.toLowerCase() !== MASTER_REALM) {
      next();
      return;
    }
    const usernames = form.getAll('username');
    if (usernames.some(namesAdmin)) {
      refuse(res);
      return;
    }
    const emails = usernames.filter((username) => username.includes('@'));
    if (emails.length === 0) {
      next();
      return;
    }
    const address = deps.clientAddress(req);
    Promise.all(emails.map((email) => deps.accounts.accountOf(MASTER_REALM, email, address))).then(
      (found) => {
        // An address past its limit was told no account: the throttle's step refuses it next.
        if (found.some((lookup) => 'account' in lookup && namesAdmin(lookup.account))) refuse(res);
        else next();
      },
      next,
    );
  };
}

function refuse(res: Parameters<RequestHandler>[1]): void {
  // Keycloak's own answer to a refused grant, so clients need no new case.
  sendTokenError(res, {
    status: 400,
    error: 'invalid_grant',
    description: 'This account signs in on the admin listener only.',
  });
}
