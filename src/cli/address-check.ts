import { CliError } from './errors.ts';

/**
 * Refuses `url` (the gateway's address `exactly`, or a URL `under` it: its token endpoint) that
 * the answer at `baseUrl` names, when it is not `pinned`, or is plain http where `baseUrl` is
 * https: TLS says who answered there, and proofs for a plain-http address would serve whoever is
 * on the way to it.
 */
export function checkLearnt(
  url: URL,
  baseUrl: URL,
  pinned: string | undefined,
  as: 'exactly' | 'under',
): void {
  const matches = as === 'exactly' ? url.href === pinned : url.href.startsWith(pinned ?? '');
  if (pinned !== undefined && !matches) {
    throw new CliError(
      'api',
      `refused: the gateway's address is ${pinned} (the one this login was made with), but the ` +
        `answer at ${baseUrl.href} names ${url.href}; nothing was sent. Another server may ` +
        'answer there; if the gateway PUBLIC_URL really changed, log in again',
    );
  }
  if (baseUrl.protocol === 'https:' && url.protocol === 'http:') {
    throw new CliError(
      'api',
      `refused: the answer at ${baseUrl.href} names ${url.href}, plain http, as the gateway's ` +
        'address; nothing was sent. If that really is its PUBLIC_URL, set ' +
        'REALMGATE_CANONICAL_URL to it',
    );
  }
}
