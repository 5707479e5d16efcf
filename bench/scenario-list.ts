import { WORKSPACE, type BenchUser } from './fixtures.ts';
import { automationPath, basicHeader, type Scenario } from './scenarios.ts';
import { HOST, PORTS } from './settings.ts';

/** Distinct tokens for the introspect-each row, so that concurrent checks are never merged. */
const INTROSPECTED_TOKENS = 1000;

export const origin = (port: number) => `http://${HOST}:${port}`;

export interface ScenarioInputs {
  organization: string;
  /** A Bearer access token of a user holding the workspace role. */
  token: string;
  /** Distinct access tokens of that user (refresh grants). */
  manyTokens: string[];
  /** One token each in as many organizations. */
  realms: { realm: string; token: string }[];
  basicUser: BenchUser;
  noCacheUsers: BenchUser[];
  /** False when src has no REVOCATION_CHECK_SECONDS yet: those rows say so. */
  revocationChecks: boolean;
}

/**
 * The rows of the table, in the order printed. Every row has a gateway process of its own, so
 * that no row inherits another's JIT or heap state (the control row shows how much two
 * identical processes differ).
 */
export function buildScenarios(input: ScenarioInputs): Scenario[] {
  const path = automationPath(input.organization, WORKSPACE);
  const bearer = `Bearer ${input.token}`;
  const rotate = (tokens: string[]) => tokens.map((t) => ({ path, authorization: `Bearer ${t}` }));
  const notImplemented = input.revocationChecks ? undefined : 'n/a (not implemented yet)';
  const introspected = input.manyTokens.slice(0, INTROSPECTED_TOKENS);
  const n = input.manyTokens.length;
  // The reference rows get the very request the Bearer row sends (a ~1.4 KB header to parse,
  // and for the limit proxy to forward), so that the rows differ only in what serves them.
  return [
    {
      id: 'limit',
      name: 'limit: minimal node:http proxy',
      origin: origin(PORTS.limitProxy),
      requests: [{ path, authorization: bearer }],
    },
    {
      id: 'auth-off',
      name: 'auth off: same gateway code, verification replaced by a constant principal',
      origin: origin(PORTS.authOff),
      requests: [{ path, authorization: bearer }],
    },
    {
      id: 'bearer',
      name: 'Bearer, 1 token (defaults: revocation check every 60 s)',
      origin: origin(PORTS.gateway),
      requests: [{ path, authorization: bearer }],
    },
    {
      id: 'bearer-control',
      name: 'Bearer, 1 token (defaults), a second identical gateway process: control',
      origin: origin(PORTS.bearerControl),
      requests: [{ path, authorization: bearer }],
    },
    {
      id: 'bearer-revocation-off',
      name: 'Bearer, 1 token, revocation checks off',
      origin: origin(PORTS.revocationOff),
      requests: [{ path, authorization: bearer }],
      unavailable: notImplemented,
    },
    {
      id: 'bearer-introspect',
      name:
        `Bearer, ${introspected.length} tokens in turn, introspection on every request ` +
        '(REVOCATION_CHECK_SECONDS=0)',
      origin: origin(PORTS.introspectEach),
      requests: rotate(introspected),
      warmupAmount: introspected.length,
      unavailable: notImplemented,
      keycloakBound: true,
    },
    {
      id: 'bearer-10k',
      name: `Bearer, ${n} distinct tokens (defaults)`,
      origin: origin(PORTS.manyTokens),
      requests: rotate(input.manyTokens),
      warmupAmount: n,
    },
    {
      id: 'bearer-10k-revocation-off',
      name: `Bearer, ${n} distinct tokens, revocation checks off`,
      origin: origin(PORTS.manyTokensRevocationOff),
      requests: rotate(input.manyTokens),
      warmupAmount: n,
      unavailable: notImplemented,
    },
    {
      id: 'bearer-realms',
      name: `Bearer, ${input.realms.length} realms × 1 token (defaults)`,
      origin: origin(PORTS.manyRealms),
      requests: input.realms.map((r) => ({
        path: automationPath(r.realm, WORKSPACE),
        authorization: `Bearer ${r.token}`,
      })),
    },
    {
      id: 'basic-warm',
      name: 'Basic, warm cache',
      origin: origin(PORTS.basicWarm),
      requests: [{ path, authorization: basicHeader(input.basicUser) }],
    },
    {
      id: 'list',
      name: 'list endpoint GET /api/<org>/platform/workspaces (Bearer, database)',
      origin: origin(PORTS.list),
      requests: [{ path: `/api/${input.organization}/platform/workspaces`, authorization: bearer }],
    },
    {
      id: 'basic-nocache',
      name:
        `Basic, cache off (BASIC_CACHE_MAX_SECONDS=0), ${input.noCacheUsers.length} users in ` +
        'turn: a password grant per request',
      origin: origin(PORTS.basicNoCache),
      requests: input.noCacheUsers.map((u) => ({ path, authorization: basicHeader(u) })),
      keycloakBound: true,
    },
  ];
}
