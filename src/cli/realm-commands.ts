import type { TokenLifetimes } from '../platform/realm-admin/token-lifetimes.ts';
import { apiCommand } from './api-command.ts';
import { lifetimesPath, signingKeysRefreshPath } from './api-requests.ts';
import type { Args, CommandEntry } from './command-spec.ts';
import { usageError } from './errors.ts';
import { checkRealm, parseDuration, parseFlag } from './values.ts';

/** The options of `lifetimes set` and the field each one sets. */
const LIFETIME_OPTIONS = {
  access: 'access_token_lifespan',
  'client-idle': 'client_session_idle_timeout',
  'client-max': 'client_session_max_lifespan',
  'offline-idle': 'offline_session_idle_timeout',
  'offline-max': 'offline_session_max_lifespan',
} as const satisfies Record<string, keyof TokenLifetimes>;

/**
 * `lifetimes ...`, `realms protect` and `realms refresh-keys`: settings of a realm, or of every
 * realm, and what the gateway holds of them.
 */
export const REALM_COMMANDS: readonly CommandEntry[] = [
  apiCommand({
    name: 'lifetimes show',
    positionals: ['realm'],
    parse: (args) => ({ realm: checkRealm(args.at(0), '<realm>') }),
    request: ({ realm }) => ({ method: 'GET', path: lifetimesPath(realm) }),
  }),
  apiCommand({
    name: 'lifetimes set',
    positionals: ['realm'],
    options: {
      ...Object.fromEntries(Object.keys(LIFETIME_OPTIONS).map((name) => [name, { value: 'dur' }])),
      'offline-max-enabled': { value: 'true|false' },
      'dpop-required': { value: 'true|false' },
    },
    parse: (args) => ({ realm: checkRealm(args.at(0), '<realm>'), lifetimes: readLifetimes(args) }),
    request: ({ realm, lifetimes }) => ({
      method: 'PATCH',
      path: lifetimesPath(realm),
      body: lifetimes,
    }),
  }),
  apiCommand({
    name: 'realms protect',
    request: () => ({ method: 'POST', path: '/api/platform/brute-force-detection' }),
  }),
  apiCommand({
    name: 'realms refresh-keys',
    positionals: ['realm'],
    parse: (args) => ({ realm: checkRealm(args.at(0), '<realm>') }),
    request: ({ realm }) => ({ method: 'POST', path: signingKeysRefreshPath(realm) }),
  }),
];

function readLifetimes(args: Args): Partial<TokenLifetimes> {
  const lifetimes: Partial<TokenLifetimes> = {};
  for (const [option, field] of Object.entries(LIFETIME_OPTIONS)) {
    const value = args.one(option);
    if (value !== undefined) lifetimes[field] = parseDuration(value, `--${option}`);
  }
  const enabled = args.one('offline-max-enabled');
  if (enabled !== undefined) {
    lifetimes.offline_session_max_lifespan_enabled = parseFlag(enabled, '--offline-max-enabled');
  }
  const dpop = args.one('dpop-required');
  if (dpop !== undefined) {
    lifetimes.dpop_bound_access_tokens = parseFlag(dpop, '--dpop-required');
  }
  if (Object.keys(lifetimes).length === 0) {
    throw usageError('lifetimes set needs at least one option');
  }
  return lifetimes;
}
