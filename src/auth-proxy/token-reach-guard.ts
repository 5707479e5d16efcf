import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import {
  keycloakReachRefusal,
  LOOKUPS_SPENT,
  type LookupsSpent,
  type ReachRefusal,
  type ReachStep,
} from '../auth/reach.ts';
import type { SignedSessionReader } from '../auth/bearer/session-token.ts';
import { errorCodes } from '../envelope/errors.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { sendTokenError, type Replacement } from './grant-answer.ts';
import { tokenSessionId } from './refresh-token-claims.ts';

/**
 * Why the step refused a request, as the audit log is told it: a token's reach (`name`: its job
 * credential's, when it was given one; `realm`: its session's, as recorded at issuance; `token`:
 * the token refused, whose session `sessionId` names: never to be kept), more tokens than one
 * request carries, a token in a spelling Keycloak may read but no realm signed, or a reach it
 * could not look up.
 */
export type TokenReachRefusal =
  | {
      why: ReachRefusal;
      name: string | undefined;
      realm: string | undefined;
      sessionId: string;
      token: string;
    }
  | {
      why: 'tooManyTokens' | 'invalidToken' | 'databaseUnavailable';
      name?: undefined;
      realm?: undefined;
      sessionId?: undefined;
      token?: undefined;
    };

/** Told of each request the step refuses (the audit log's, auth-steps.ts); before its answer. */
export type TokenReachRefusalListener = (
  req: IncomingMessage,
  res: ServerResponse,
  refusal: TokenReachRefusal,
) => void;

/**
 * A token a request carries: its session, the scheme it came with (a form's: Bearer), and the
 * token (for the audit log, which names its session's job credential only once it verified it).
 */
interface CarriedToken {
  sessionId: string;
  scheme: 'Bearer' | 'DPoP';
  token: string;
  /** The token as Keycloak reads it (`strictSpelling`): what is verified. */
  spelled: string;
}

/**
 * How many distinct tokens one request may carry: a client sends one; each is a signature check
 * and, signed, a lookup of its reach (the database on a miss), so a header of a thousand
 * tokens is refused, not checked a thousand times.
 */
const MAX_CARRIED_TOKENS = 4;

/**
 * The form fields Keycloak takes an access token from: userinfo's (RFC 6750 2.2), and a token
 * exchange's subject and actor (RFC 8693), whose new token may belong to no session, so no reach.
 */
const FORM_TOKEN_FIELDS = ['access_token', 'subject_token', 'actor_token'];

/**
 * Every token the request carries where Keycloak might read one: its `Authorization` headers,
 * in every spelling (several headers, a comma list, a scheme word in any case), and its form's
 * token fields (`FORM_TOKEN_FIELDS`). A word that reads as a
 * token of Keycloak's is one, so no spelling passes a token unchecked. Each distinct token (as
 * Keycloak reads it, `strictSpelling`) is kept, not one per session: a forged copy naming a real
 * token's session must not stand in for it (Keycloak may read the real one: a token exchange's
 * `subject_token` beside an `access_token` it ignores). Undefined past `MAX_CARRIED_TOKENS`.
 */
function carriedTokens(req: IncomingMessage): CarriedToken[] | undefined {
  const carried: CarriedToken[] = [];
  const add = (word: string, scheme: CarriedToken['scheme']): boolean => {
    const sessionId = tokenSessionId(word);
    const spelled = strictSpelling(word);
    if (sessionId === undefined || carried.some((token) => token.spelled === spelled)) {
      return true;
    }
    if (carried.length === MAX_CARRIED_TOKENS) return false;
    carried.push({ sessionId, scheme, token: word, spelled });
    return true;
  };
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'authorization') continue;
    let scheme: CarriedToken['scheme'] = 'Bearer';
    for (const word of raw[i + 1]!.split(/[\s,]+/)) {
      const lower = word.toLowerCase();
      if (lower === 'dpop' || lower === 'bearer') {
        scheme = lower === 'dpop' ? 'DPoP' : 'Bearer';
      } else if (!add(word, scheme)) {
        return undefined;
      }
    }
  }
  // Read as the headers are, word by word: nothing around a token hides it.
  const form = formFieldsOf(req);
  const fields = FORM_TOKEN_FIELDS.flatMap((name) => form?.getAll(name) ?? []);
  for (const word of fields.flatMap((value) => value.split(/[\s,]+/))) {
    if (!add(word, 'Bearer')) return undefined;
  }
  return carried;
}

const TOO_MANY_TOKENS: Replacement = {
  status: 400,
  error: 'invalid_request',
  description: 'A request carries one access token.',
};

const EXPIRED_MESSAGE = 'The refresh token of this session has expired.';
const INVALID_MESSAGE = 'The access token could not be verified.';

/**
 * The token as Keycloak reads it: its signature part decoded leniently, as Keycloak decodes one
 * (refresh-token-claims.ts: padding and anything after it, a dot after it, the standard
 * alphabet give the same token), in the strict spelling the gateway's verification takes. A word
 * already in that spelling is itself.
 */
function strictSpelling(word: string): string {
  const signed = /^[\w-]+\.[\w-]+\./.exec(word)?.[0];
  if (signed === undefined) return word;
  const signature = word.slice(signed.length).split(/[=.]/)[0]!;
  return signed + signature.replaceAll('+', '-').replaceAll('/', '_');
}

/**
 * `/auth` answers in OAuth's shape: a resource's refusals are RFC 6750's (section 3.1), the
 * token's expiry with its scheme's challenge, as `/api` answers it.
 */
function refusalAnswer(refusal: ReachRefusal): Replacement {
  switch (refusal) {
    case 'expired':
      return { status: 401, error: 'invalid_token', description: EXPIRED_MESSAGE };
    case 'readOnlyToken':
      return {
        status: 403,
        error: 'insufficient_scope',
        description: errorCodes.readOnlyToken.message,
      };
    case 'outsideTokenReach':
      return {
        status: 403,
        error: 'insufficient_scope',
        description: 'This token reaches its workspaces only, not the account.',
      };
  }
}

/** Its reach could not be looked up (the database down, and no replica read it before). */
const UNKNOWN_REACH: Replacement = {
  status: 503,
  error: 'temporarily_unavailable',
  description: errorCodes.databaseUnavailable.message,
};

const isLookedUp = <Reach>(reach: Reach | LookupsSpent): reach is Reach => reach !== LOOKUPS_SPENT;

/**
 * A reach this process does not know, and the client has no lookup left (reach.ts
 * `LOOKUPS_SPENT`): unknown, as with the database down, until its lookups come back.
 */
export function sendLookupsSpent(res: ServerResponse): void {
  res.setHeader('retry-after', '1');
  sendTokenError(res, UNKNOWN_REACH);
}

function refuse(res: ServerResponse, refusal: ReachRefusal, token: CarriedToken): void {
  const answer = refusalAnswer(refusal);
  if (answer.status === 401) challenge(res, token, EXPIRED_MESSAGE);
  sendTokenError(res, answer);
}

function challenge(res: ServerResponse, token: CarriedToken, description: string): void {
  res.setHeader(
    'www-authenticate',
    `${token.scheme} error="invalid_token", error_description="${description}"`,
  );
}

/** A token in a spelling only Keycloak's lenient reading takes, which no realm signed. */
function refuseInvalid(res: ServerResponse, token: CarriedToken): void {
  challenge(res, token, INVALID_MESSAGE);
  sendTokenError(res, { status: 401, error: 'invalid_token', description: INVALID_MESSAGE });
}

/**
 * The `/auth` step of a job credential's reach (auth-steps.ts): its tokens carry the roles and
 * audience of Keycloak's Account API like any of its user's, so a call to Keycloak with one is
 * held to the reach the `/api` admission holds it to (reach.ts `keycloakReachRefusal`): a write
 * of a read-only token, anything of a workspace-narrowed one, anything past its lifetime is
 * refused before Keycloak sees it. Only a token its realm signed (`signedSession`, its lifetime
 * aside) names a session whose reach is looked up, on the sender's share (reach.ts `reachOf`;
 * past it the request waits, 503 with Retry-After, as with the database down): a forged one
 * spends no lookup, and goes on to Keycloak, which refuses it as it always did (a token that is
 * not its own), unless it is in a spelling only Keycloak's lenient reading takes (padding after
 * its signature): refused here, 401 `invalid_token`, since Keycloak might read it as a real
 * token the gateway did not check. Whether a realm signed it cannot be told (its key set
 * cannot be fetched, its realm not looked up now): 503 with Retry-After.
 */
export function guardTokenReach(deps: {
  reach: ReachStep;
  /** The session of an access token its realm signed (session-token.ts). */
  signedSession: SignedSessionReader;
  /** The sender's address, whose share of the lookups a realm's confirmation spends. */
  clientAddress: (req: IncomingMessage) => string;
  logger: Logger;
  clock?: Clock;
  /** Told of each refusal (the audit log, when it is on). */
  refused?: TokenReachRefusalListener | undefined;
}): RequestHandler {
  const clock = deps.clock ?? systemClock;
  const refused = deps.refused ?? (() => undefined);
  /** Admits the request if the reach of each token (verified) lets it, else its refusal. */
  function holdToReach(
    req: Parameters<RequestHandler>[0],
    res: Parameters<RequestHandler>[1],
    tokens: CarriedToken[],
    next: Parameters<RequestHandler>[2],
  ): void {
    if (tokens.length === 0) {
      next();
      return;
    }
    Promise.all(tokens.map((token) => deps.reach.reachOf(token.sessionId, req))).then(
      (reaches) => {
        if (!reaches.every(isLookedUp)) {
          refused(req, res, { why: 'databaseUnavailable' });
          sendLookupsSpent(res);
          return;
        }
        for (const [i, reach] of reaches.entries()) {
          const refusal = reach && keycloakReachRefusal(reach, req.method, clock.now());
          if (reach && refusal) {
            const { sessionId, token } = tokens[i]!;
            refused(req, res, {
              why: refusal,
              name: reach.name,
              realm: reach.realm,
              sessionId,
              token,
            });
            refuse(res, refusal, tokens[i]!);
            return;
          }
        }
        next();
      },
      (err: unknown) => {
        deps.logger.warn({ err }, "could not look up a token's reach on /auth");
        refused(req, res, { why: 'databaseUnavailable' });
        sendTokenError(res, UNKNOWN_REACH);
      },
    );
  }

  return (req, res, next) => {
    const tokens = carriedTokens(req);
    if (tokens === undefined) {
      refused(req, res, { why: 'tooManyTokens' });
      sendTokenError(res, TOO_MANY_TOKENS);
      return;
    }
    if (tokens.length === 0) {
      next();
      return;
    }
    const client = deps.clientAddress(req);
    const signedOf = async (token: CarriedToken) => {
      const signed = await deps.signedSession(token.spelled, client);
      return signed?.sessionId === token.sessionId;
    };
    Promise.all(tokens.map(signedOf)).then(
      (signed) => {
        const invalid = tokens.find((token, i) => !signed[i] && token.spelled !== token.token);
        if (invalid !== undefined) {
          refused(req, res, { why: 'invalidToken' });
          refuseInvalid(res, invalid);
          return;
        }
        holdToReach(
          req,
          res,
          tokens.filter((_, i) => signed[i]),
          next,
        );
      },
      // Whether a realm signed it cannot be told now: as a reach not looked up, retry in a second.
      (err: unknown) => {
        deps.logger.warn({ err }, 'could not check the signature of a token on /auth');
        refused(req, res, { why: 'databaseUnavailable' });
        sendLookupsSpent(res);
      },
    );
  };
}
