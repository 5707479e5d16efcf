/**
 * An authentication that failed for a reason worth telling the caller. The auth middleware
 * turns it into 401 `401-00002` with the right `WWW-Authenticate` challenge.
 */
export class AuthFailure extends Error {
  constructor(
    readonly scheme: 'basic' | 'bearer',
    /** Safe to show the client: never echoes credentials. */
    readonly publicMessage: string,
    options: { cause?: unknown } = {},
  ) {
    super(publicMessage, options);
    this.name = 'AuthFailure';
  }
}
