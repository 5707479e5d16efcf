import { sessionCommand, type Args, type CommandEntry } from './command-spec.ts';
import type { LoginSelector } from './credentials.ts';
import { DPOP_NONCE } from './dpop.ts';
import { usageError } from './errors.ts';
import { login } from './login.ts';
import { passwordSourceOf } from './password.ts';
import { accessToken, listTokens, logout, proofFor, revokeTokens } from './session.ts';
import { checkRealm, checkWorkspace, parseDuration } from './values.ts';

/** `--realm` and `--user`: which stored login a token command uses. */
const SELECTOR_OPTIONS = { realm: { value: 'realm' }, user: { value: 'username' } };

// Keycloak session ids (the `id` of tokens list): UUIDs, or base64url-like on newer versions;
// the names given at login (`--name`) fit the same alphabet.
const SESSION_ID = /^[A-Za-z0-9._~-]{1,128}$/;

/** The API client's commands: a stored login and its tokens (login.ts, session.ts). */
export const SESSION_COMMANDS: readonly CommandEntry[] = [
  sessionCommand({
    name: 'login',
    positionals: ['realm', 'username'],
    options: {
      'password-stdin': {},
      otp: {},
      name: { value: 'name' },
      workspace: { value: 'workspace', repeat: true },
      'read-only': {},
      expires: { value: 'duration' },
      'no-dpop': {},
      'key-file': { value: 'path' },
    },
    parse: (args) => {
      const expires = args.one('expires');
      return {
        realm: checkRealm(args.at(0), '<realm>'),
        username: args.at(1),
        passwordFrom: passwordSourceOf(args),
        /** Ask for the one-time password before the first try. */
        otp: args.has('otp'),
        job: {
          name: args.one('name'),
          workspaces: args.many('workspace').map((ws) => checkWorkspace(ws, '--workspace')),
          readOnly: args.has('read-only'),
          expiresInSeconds: expires === undefined ? undefined : parseDuration(expires, '--expires'),
        },
        dpop: !args.has('no-dpop'),
        keyFile: args.one('key-file'),
      };
    },
    run: async (command, context) => ({ json: await login(command, context) }),
  }),
  sessionCommand({
    name: 'token',
    options: SELECTOR_OPTIONS,
    parse: (args) => ({ select: readSelector(args) }),
    run: async ({ select }, context) => ({ text: await accessToken(select, context) }),
  }),
  sessionCommand({
    name: 'proof',
    positionals: ['method', 'url'],
    options: { ...SELECTOR_OPTIONS, nonce: { value: 'nonce' } },
    parse: (args) => ({
      select: readSelector(args),
      target: {
        method: readMethod(args.at(0)),
        url: readCallUrl(args.at(1)),
        nonce: readNonce(args.one('nonce')),
      },
    }),
    run: async ({ select, target }, context) => ({
      text: await proofFor(select, target, context),
    }),
  }),
  sessionCommand({
    name: 'tokens list',
    options: SELECTOR_OPTIONS,
    parse: (args) => ({ select: readSelector(args) }),
    run: async ({ select }, context) => ({ json: await listTokens(select, context) }),
  }),
  sessionCommand({
    name: 'tokens revoke',
    optional: { name: 'id|name', or: 'all' },
    options: { all: {}, ...SELECTOR_OPTIONS },
    /** `id` undefined: `--all`. */
    parse: (args) => {
      const id = args.optional();
      // The word is not echoed, as no other refused word is: it could be a misplaced password.
      if (id !== undefined && !SESSION_ID.test(id)) {
        throw usageError(
          'invalid token id or name: letters, digits and . _ ~ - (at most 128), ' +
            'as tokens list shows it',
        );
      }
      return { select: readSelector(args), id };
    },
    run: async ({ select, id }, context) => ({ json: await revokeTokens(select, id, context) }),
  }),
  sessionCommand({
    name: 'logout',
    options: SELECTOR_OPTIONS,
    parse: (args) => ({ select: readSelector(args) }),
    run: async ({ select }, context) => {
      await logout(select, context);
      return { nothing: true };
    },
  }),
];

// An HTTP method is a token (RFC 9110); the CLI sends it in capitals, as curl's -X does.
const METHOD = /^[A-Za-z]{1,20}$/;

function readMethod(method: string): string {
  // The word is not echoed, as no other refused word is: it could be a misplaced password.
  if (!METHOD.test(method)) throw usageError('invalid method: letters only, like GET or POST');
  return method.toUpperCase();
}

/** The URL a proof is for: absolute, http or https (its query and fragment are left out). */
function readCallUrl(text: string): URL {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw usageError('the url of proof is an absolute http:// or https:// URL');
  }
  return url;
}

function readSelector(args: Args): LoginSelector {
  const realm = args.one('realm');
  const user = args.one('user');
  return {
    ...(realm === undefined ? {} : { realm: checkRealm(realm, '--realm') }),
    ...(user === undefined ? {} : { user }),
  };
}

/** `--nonce`: the server's `DPoP-Nonce` (DPOP_NONCE), as RFC 9449 allows it in a proof. */
function readNonce(nonce: string | undefined): string | undefined {
  if (nonce !== undefined && !DPOP_NONCE.test(nonce)) {
    // Not echoed: a word in the wrong place may be a password.
    throw usageError(
      'invalid --nonce: a nonce is 1 to 512 visible ASCII characters but " and \\ (RFC 9449)',
    );
  }
  return nonce;
}
