/**
 * Every error the API can answer with, as one closed table. Result codes follow the
 * platform's `SSS-FFNNN` scheme (status, function, sequence); see docs in README.
 * FF: 00 common, 11 auth proxy, 22 workspace, 23 organization, 30 tokens, 40 audit log.
 */
export const errorCodes = {
  badRequestHeader: { status: 400, result: '400-00001', message: 'Bad request header.' },
  badRequestBody: { status: 400, result: '400-00002', message: 'Bad request body.' },
  gatewayServiceToken: {
    status: 401,
    result: '401-00001',
    message: 'The gateway could not obtain its service token.',
  },
  authenticationFailed: { status: 401, result: '401-00002', message: 'Authentication failed.' },
  permissionDenied: { status: 403, result: '403-00001', message: 'Permission denied.' },
  outsideTokenReach: {
    status: 403,
    result: '403-30001',
    message: 'This token does not reach this workspace.',
  },
  readOnlyToken: {
    status: 403,
    result: '403-30002',
    message: 'This token is read-only: only GET, HEAD and OPTIONS.',
  },
  protectedAccount: { status: 403, result: '403-00002', message: 'This account is protected.' },
  organizationDisabled: { status: 403, result: '403-23001', message: 'Organization disabled.' },
  organizationDeleteUnconfirmed: {
    status: 400,
    result: '400-23001',
    message: 'Deleting an organization needs ?confirm=<organization id>.',
  },
  offlineSessionsUnreadable: {
    status: 400,
    result: '400-30001',
    message: 'Reading the refresh tokens failed.',
  },
  realmUnreadable: {
    status: 400,
    result: '400-30002',
    message: 'Reading the realm settings failed.',
  },
  notFound: { status: 404, result: '404-00000', message: 'Not found.' },
  auditDownloadLimit: {
    status: 400,
    result: '400-40001',
    message:
      'The organization keeps as many audit log downloads as it may; old ones go after 7 days.',
  },
  auditDownloadNotFound: {
    status: 404,
    result: '404-40001',
    message: 'No such audit log download.',
  },
  auditDownloadNotReady: {
    status: 409,
    result: '409-40001',
    message: 'This audit log download has no file: see its status.',
  },
  refreshTokenNotFound: { status: 404, result: '404-30001', message: 'Refresh token not found.' },
  revokeFailed: {
    status: 500,
    result: '500-30001',
    message: 'Revoking the refresh tokens failed.',
  },
  organizationNotFound: { status: 404, result: '404-00001', message: 'Organization not found.' },
  workspaceNotFound: { status: 404, result: '404-00002', message: 'Workspace not found.' },
  userNotFound: { status: 404, result: '404-00003', message: 'User not found.' },
  methodNotAllowed: { status: 405, result: '405-00000', message: 'Method not allowed.' },
  requestTimeout: {
    status: 408,
    result: '408-00000',
    message: 'The request was not sent in time.',
  },
  userExists: { status: 409, result: '409-00001', message: 'User already exists.' },
  payloadTooLarge: { status: 413, result: '413-00000', message: 'Request too large.' },
  expectationFailed: {
    status: 417,
    result: '417-00000',
    message: 'Only the expectation 100-continue is supported.',
  },
  tooManyFailedLogins: {
    status: 429,
    result: '429-00001',
    message: 'Too many failed logins; retry later.',
  },
  headersTooLarge: { status: 431, result: '431-00000', message: 'Request headers too large.' },
  identityProviderBadGateway: {
    status: 502,
    result: '502-11001',
    message: 'The identity provider sent an invalid answer.',
  },
  identityProviderUnavailable: {
    status: 503,
    result: '503-11001',
    message: 'The identity provider is unavailable; retry later.',
  },
  identityProviderTimeout: {
    status: 504,
    result: '504-11001',
    message: 'The identity provider did not answer in time; retry later.',
  },
  upstreamBadGateway: {
    status: 502,
    result: '502-00001',
    message: 'The automation service sent an invalid answer.',
  },
  upstreamTimeout: {
    status: 504,
    result: '504-00001',
    message: 'The automation service did not answer in time; retry later.',
  },
  upstreamUnavailable: {
    status: 503,
    result: '503-00002',
    message: 'The automation service is unavailable; retry later.',
  },
  notReady: { status: 503, result: '503-00001', message: 'Not ready.' },
  databaseUnavailable: {
    status: 503,
    result: '503-00003',
    message: 'The database is unavailable; retry later.',
  },
  unexpected: { status: 500, result: '500-99999', message: 'Unexpected error.' },
} as const satisfies Record<string, { status: number; result: string; message: string }>;

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
