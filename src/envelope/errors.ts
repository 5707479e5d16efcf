/** What an error answers: the HTTP status, the result code and the client's message. */
interface ErrorAnswer {
  status: number;
  result: string;
  message: string;
}

/** One code's answer: its HTTP status is the result's first three digits, so the two always agree. */
function answer(result: string, message: string): ErrorAnswer {
  return { status: Number(result.slice(0, 3)), result, message };
}

/**
 * Every error the API can answer with, as one closed table. Result codes follow the
 * platform's `SSS-FFNNN` scheme (status, function, sequence); see docs in README.
 * FF: 00 common, 11 auth proxy, 22 workspace, 23 organization, 30 tokens, 40 audit log.
 */
export const errorCodes = {
  badRequestHeader: answer('400-00001', 'Bad request header.'),
  badRequestBody: answer('400-00002', 'Bad request body.'),
  gatewayServiceToken: answer('401-00001', 'The gateway could not obtain its service token.'),
  authenticationFailed: answer('401-00002', 'Authentication failed.'),
  permissionDenied: answer('403-00001', 'Permission denied.'),
  outsideTokenReach: answer('403-30001', 'This token does not reach this workspace.'),
  readOnlyToken: answer('403-30002', 'This token is read-only: only GET, HEAD and OPTIONS.'),
  protectedAccount: answer('403-00002', 'This account is protected.'),
  organizationDisabled: answer('403-23001', 'Organization disabled.'),
  organizationDeleteUnconfirmed: answer(
    '400-23001',
    'Deleting an organization needs ?confirm=<organization id>.',
  ),
  offlineSessionsUnreadable: answer('400-30001', 'Reading the refresh tokens failed.'),
  realmUnreadable: answer('400-30002', 'Reading the realm settings failed.'),
  notFound: answer('404-00000', 'Not found.'),
  auditDownloadLimit: answer(
    '400-40001',
    'The organization keeps as many audit log downloads as it may; old ones go after 7 days.',
  ),
  auditDownloadNotFound: answer('404-40001', 'No such audit log download.'),
  auditDownloadNotReady: answer(
    '409-40001',
    'This audit log download has no file: see its status.',
  ),
  auditExportPruned: answer(
    '409-40002',
    'Retention removed records of this export while it was read: export again.',
  ),
  refreshTokenNotFound: answer('404-30001', 'Refresh token not found.'),
  revokeFailed: answer('500-30001', 'Revoking the refresh tokens failed.'),
  organizationNotFound: answer('404-00001', 'Organization not found.'),
  workspaceNotFound: answer('404-00002', 'Workspace not found.'),
  userNotFound: answer('404-00003', 'User not found.'),
  methodNotAllowed: answer('405-00000', 'Method not allowed.'),
  requestTimeout: answer('408-00000', 'The request was not sent in time.'),
  userExists: answer('409-00001', 'User already exists.'),
  workspaceHeldElsewhere: answer(
    '409-22001',
    'The user holds this workspace through a group or a composite role in Keycloak: remove it there, then repeat this request.',
  ),
  payloadTooLarge: answer('413-00000', 'Request too large.'),
  expectationFailed: answer('417-00000', 'Only the expectation 100-continue is supported.'),
  tooManyFailedLogins: answer('429-00001', 'Too many failed logins; retry later.'),
  tooManyAtOnce: answer('429-00002', 'Too many requests from your address at once; retry later.'),
  auditReadsBusy: answer(
    '429-40001',
    'As many audit log reads, exports and downloads as the gateway runs at once, or as your organization may, are running; retry later.',
  ),
  headersTooLarge: answer('431-00000', 'Request headers too large.'),
  identityProviderBadGateway: answer('502-11001', 'The identity provider sent an invalid answer.'),
  identityProviderUnavailable: answer(
    '503-11001',
    'The identity provider is unavailable; retry later.',
  ),
  identityProviderTimeout: answer(
    '504-11001',
    'The identity provider did not answer in time; retry later.',
  ),
  upstreamBadGateway: answer('502-00001', 'The automation service sent an invalid answer.'),
  upstreamTimeout: answer(
    '504-00001',
    'The automation service did not answer in time; retry later.',
  ),
  upstreamUnavailable: answer('503-00002', 'The automation service is unavailable; retry later.'),
  notReady: answer('503-00001', 'Not ready.'),
  databaseUnavailable: answer('503-00003', 'The database is unavailable; retry later.'),
  unexpected: answer('500-99999', 'Unexpected error.'),
} as const satisfies Record<string, ErrorAnswer>;

export type ErrorCode = keyof typeof errorCodes;

/**
 * The one error class routes throw. `message` and `data` are shown to the client, so they
 * must never carry secrets; `cause` is only logged.
 */
export class AppError extends Error {
  readonly status: number;
  readonly result: string;
  readonly code: ErrorCode;

  constructor(
    code: ErrorCode,
    options: {
      message?: string;
      data?: unknown;
      cause?: unknown;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(options.message ?? errorCodes[code].message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = errorCodes[code].status;
    this.result = errorCodes[code].result;
    this.data = options.data ?? null;
    this.headers = options.headers ?? {};
  }

  readonly data: unknown;
  readonly headers: Record<string, string>;
}
