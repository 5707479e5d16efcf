/**
 * Exit statuses of the realmgate command. Scripts branch on them, so each failure kind keeps
 * its own number: "the API said no" (1) must not look like "the gateway is down" (3).
 */
export const exitCodes = {
  success: 0,
  api: 1,
  usage: 2,
  config: 2,
  unreachable: 3,
  /** `audit verify`: a record that does not fit its chain (edited, removed, moved). */
  verification: 4,
  /** The identity provider (Keycloak) behind the gateway is down, too slow or answers wrongly. */
  identityProvider: 5,
  /** Another realmgate held the credentials lock (its refresh, say) for longer than the wait. */
  busy: 6,
  /**
   * The reader of stdout stopped reading (`| head`): the command stopped at once, with the
   * status of a program that SIGPIPE ended (128 + 13), as `set -o pipefail` scripts know it.
   */
  outputClosed: 141,
} as const;

export type CliErrorKind = Exclude<keyof typeof exitCodes, 'success'>;

/** What each exit status says, as `--help` and docs/tokens-and-cli.md list them. */
export const exitStatusMeanings = {
  success: 'success',
  api: 'the gateway answered with an error (a refused login or refresh token included)',
  usage: 'usage error',
  config: 'configuration error (the credentials file or its directory)',
  unreachable: 'gateway unreachable or silent for 30 s, or an audit export cut off (no file kept)',
  verification: 'audit verify: a record does not fit its chain',
  identityProvider:
    'Keycloak behind the gateway down, too slow or failing (5xx-11001); retry later',
  busy: 'another realmgate held the credentials lock past the wait, or took it over; retry later',
  outputClosed: 'stdout closed before all was printed (| head): stopped there, as by SIGPIPE',
} as const satisfies Record<keyof typeof exitCodes, string>;

/** The exit statuses in order, each with what it says (statuses several kinds share joined). */
export function describeExitStatuses(): Array<{ status: number; meaning: string }> {
  const byStatus = new Map<number, string[]>();
  for (const [kind, status] of Object.entries(exitCodes)) {
    const meanings = byStatus.get(status) ?? [];
    meanings.push(exitStatusMeanings[kind as keyof typeof exitCodes]);
    byStatus.set(status, meanings);
  }
  return [...byStatus]
    .sort(([a], [b]) => a - b)
    .map(([status, meanings]) => ({ status, meaning: meanings.join('; ') }));
}

/**
 * The one error class of the CLI. `message` is printed as is, so it must never carry a
 * password, token or OTP secret. `group` (usage errors only) selects the usage lines to show.
 */
export class CliError extends Error {
  readonly exitCode: number;
  readonly kind: CliErrorKind;
  readonly group: string | undefined;
  /** For `api` errors: the gateway's HTTP status, when it answered. */
  readonly status: number | undefined;

  constructor(kind: CliErrorKind, message: string, group?: string, status?: number) {
    super(message);
    this.name = 'CliError';
    this.kind = kind;
    this.group = group;
    this.status = status;
    this.exitCode = exitCodes[kind];
  }
}

/** A mistake on the command line: shown with the usage, exit status 2. */
export function usageError(message: string, group?: string): CliError {
  return new CliError('usage', message, group);
}

/**
 * The gateway's result codes that say its identity provider (Keycloak) failed: unreachable,
 * too slow, or an answer it could not use. A login or call that meets one may work in a while,
 * so it exits 5 (`identityProvider`), which automation retries, unlike a refusal (1).
 */
// The gateway's errorCodes identityProviderUnavailable, -Timeout and -BadGateway
// (src/envelope/errors.ts, docs/api.md); not imported, so the CLI's bundle stays small.
const IDENTITY_PROVIDER_RESULTS: ReadonlySet<string> = new Set([
  '503-11001',
  '504-11001',
  '502-11001',
]);

/**
 * The error of an envelope the gateway answered with (`result` and `message` printable already):
 * `error <status> <result>: <message>`, as scripts grep for it.
 */
export function envelopeError(status: number, result: string, message: string): CliError {
  const kind = IDENTITY_PROVIDER_RESULTS.has(result) ? 'identityProvider' : 'api';
  return new CliError(kind, `error ${status} ${result}: ${message}`, undefined, status);
}
