import type { StoredLogin } from './credentials.ts';
import { checkLearnt } from './address-check.ts';
import { CliError } from './errors.ts';
import { learnGatewayAddress } from './gateway-address.ts';
import { httpUrlOf } from './token-endpoint.ts';

// The gateway's own address (its PUBLIC_URL) is what a login's proofs name, and it is learnt
// from answers nothing authenticates: whoever answers at REALMGATE_URL (a plain-http internal
// name, a port on a shared runner taken while the gateway is down) could name another gateway's
// address and be sent a refresh token or access token with a proof valid there. So the address
// is learnt once, at login (or named by the operator), kept in the stored login, and an answer
// that names another one later is refused before anything is sent. docs/tokens-and-cli.md says
// what this stops and what it does not.

/** REALMGATE_CANONICAL_URL, ending with `/`; undefined when unset. */
export function canonicalUrlSetting(env: Record<string, string | undefined>): URL | undefined {
  const text = env.REALMGATE_CANONICAL_URL?.trim();
  if (!text) return undefined;
  const url = httpUrlOf(text.endsWith('/') ? text : `${text}/`);
  if (url === undefined || url.username || url.password) {
    throw new CliError(
      'config',
      'REALMGATE_CANONICAL_URL must be an http:// or https:// URL without credentials, query ' +
        'or fragment (the gateway PUBLIC_URL)',
    );
  }
  return url;
}

/**
 * `login` with the address REALMGATE_CANONICAL_URL names, when set: one it was made with is
 * the same or none (a login made before the CLI kept it), else a config error naming both.
 */
export function withCanonicalSetting(
  login: StoredLogin,
  env: Record<string, string | undefined>,
): StoredLogin {
  const setting = canonicalUrlSetting(env)?.href;
  if (setting === undefined || login.canonicalUrl === setting) return login;
  if (login.canonicalUrl === undefined) return { ...login, canonicalUrl: setting };
  throw new CliError(
    'config',
    `REALMGATE_CANONICAL_URL names ${setting}, but the stored login of ${login.username} ` +
      `(realm ${login.realm}) was made with ${login.canonicalUrl}; unset it, or log in again`,
  );
}

/**
 * The address a login's proofs name (ending with `/`): as the answer at `baseUrl` names it,
 * when it is `pinned` (the address the login was made with) or nothing is pinned; while the
 * gateway cannot say, the pinned address, else `baseUrl`.
 */
export async function canonicalAddressOf(
  baseUrl: URL,
  realm: string,
  pinned: string | undefined,
  timeoutMs: number,
  learn: typeof learnGatewayAddress = learnGatewayAddress,
): Promise<URL> {
  const learnt = await learn(baseUrl, realm, timeoutMs);
  if (learnt === undefined) return pinned === undefined ? baseUrl : new URL(pinned);
  checkLearnt(learnt, baseUrl, pinned, 'exactly');
  return learnt;
}
