import { decodeJwt } from 'jose';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { RefuseEndedSessions } from './access-revocations.ts';
import { realmOf } from './auth-routes.ts';
import type { BearerVerifier } from '../auth/bearer/bearer-verifier.ts';
import { reachExpired, type ReachStep } from '../auth/reach.ts';
import type { IssuedDetails, TokenDetailsStore } from '../auth/token-details.ts';
import { workspaceRolesOf } from '../auth/authorize.ts';
import { MASTER_REALM, WORKSPACE_ID } from '../tenancy/identifiers.ts';
import { replaceForm, formFieldsOf } from './form-body-guard.ts';
import { refreshTokenSession } from './refresh-token-claims.ts';
import {
  holdAnswer,
  sendTokenError,
  UNSETTLED,
  type GrantAnswer,
  type Replacement,
} from './grant-answer.ts';
import { recordBinding, type TokenBindingStore } from './token-bindings.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import { within } from '../time/within.ts';

/**
 * The password grant's own fields of realmgate (docs/tokens-and-cli.md, "Job credentials"):
 * a name, the workspaces the token may reach, read-only, and a shorter lifetime. Keycloak never
 * sees them.
 */
export const JOB_FIELDS = {
  name: 'realmgate_name',
  workspaces: 'realmgate_workspaces',
  readOnly: 'realmgate_read_only',
  expiresIn: 'realmgate_expires_in',
} as const;

const PREFIX = 'realmgate_';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The longest a token may be asked to live: Keycloak's own lifetime decides beyond this. */
export const MAX_EXPIRES_IN_SECONDS = 10 * 365 * 24 * 3600;

/** A name: what `tokens revoke NAME` takes, so never a session id's shape. */
export const TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const tokenName = z
  .string()
  .regex(TOKEN_NAME, {
    message: 'a name is 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit',
  })
  .refine((name) => !UUID.test(name), { message: 'a name may not look like a session id' });

const workspaceId = z.string().regex(WORKSPACE_ID, {
  message: 'not a workspace id',
});

export const jobFieldsSchema = z.strictObject({
  [JOB_FIELDS.name]: tokenName.optional(),
  [JOB_FIELDS.workspaces]: z.array(workspaceId).min(1).max(100).optional(),
  [JOB_FIELDS.readOnly]: z.enum(['true', 'false']).optional(),
  [JOB_FIELDS.expiresIn]: z
    .string()
    .regex(/^[1-9][0-9]{0,9}$/, { message: 'a whole number of seconds' })
    .transform(Number)
    .pipe(z.number().min(60).max(MAX_EXPIRES_IN_SECONDS))
    .optional(),
});

/**
 * A field of the gateway's, in any case: one Keycloak would ignore (`REALMGATE_READ_ONLY`) is
 * refused as unknown rather than leave a token of its user's whole reach.
 */
const isJobField = (key: string) => key.toLowerCase().startsWith(PREFIX);

/** What a password grant asked for: undefined when it carried none of the fields. */
export interface JobRequest {
  name: string | undefined;
  workspaces: string[] | undefined;
  readOnly: boolean;
  expiresInSeconds: number | undefined;
}

/**
 * Reads the fields from a token request's form: the request (or undefined when none is there),
 * or why they are refused. Each is given once; the workspaces as a comma list, repeated, or
 * both. One in the request's `query` is refused: Keycloak ignores the query, so the token
 * would reach all its user may while its client believes it narrowed.
 */
export function readJobFields(
  form: URLSearchParams,
  realm: string,
  query: URLSearchParams = new URLSearchParams(),
): { request: JobRequest | undefined } | { invalid: string } {
  for (const key of query.keys()) {
    if (isJobField(key)) {
      return { invalid: `${key}: the ${PREFIX}* fields go in the form body, not the query.` };
    }
  }
  const given: Record<string, unknown> = {};
  for (const key of new Set(form.keys())) {
    if (!isJobField(key)) continue;
    const values = form.getAll(key);
    if (key === JOB_FIELDS.workspaces) {
      given[key] = values.flatMap((value) => value.split(',')).map((id) => id.trim());
    } else if (values.length > 1) {
      return { invalid: `${key} is given more than once.` };
    } else given[key] = values[0];
  }
  if (Object.keys(given).length === 0) return { request: undefined };
  if (form.get('grant_type') !== 'password') {
    return { invalid: `The ${PREFIX}* fields are taken by the password grant only.` };
  }
  const parsed = jobFieldsSchema.safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path[0];
    return {
      invalid:
        issue.code === 'unrecognized_keys'
          ? `Unknown field ${issue.keys.join(', ')}.`
          : `${String(field)}: ${issue.message}.`,
    };
  }
  const fields = parsed.data;
  const workspaces = fields[JOB_FIELDS.workspaces];
  if (workspaces && realm === MASTER_REALM) {
    return { invalid: `${JOB_FIELDS.workspaces}: administrators' tokens reach no workspace.` };
  }
  return {
    request: {
      name: fields[JOB_FIELDS.name],
      workspaces: workspaces && [...new Set(workspaces)],
      readOnly: fields[JOB_FIELDS.readOnly] === 'true',
      expiresInSeconds: fields[JOB_FIELDS.expiresIn],
    },
  };
}

export interface JobCredentialsDeps {
  store: TokenDetailsStore;
  /** Where every password grant's session notes the key its tokens are bound to (DPoP). */
  bindings: TokenBindingStore;
  reach: ReachStep;
  bearer: BearerVerifier;
  /** Ends an offline session in Keycloak: one issued with fields that could not be recorded. */
  endSession: (realm: string, sessionId: string) => Promise<void>;
  /** Of the user's sessions `sessionIds`, those Keycloak has ended (in none of its lists). */
  endedSessions: (
    realm: string,
    userId: string,
    sessionIds: readonly string[],
  ) => Promise<string[]>;
  /**
   * Refuses, on every replica, the access tokens of sessions Keycloak ended, for as long as one
   * of the realm's may live (read within `waitMs`, else for a day).
   */
  refuseEnded: RefuseEndedSessions;
  /** How long the look for an ended session, and refusing it, may take (KEYCLOAK_TIMEOUT_MS). */
  lookupMs: number;
  logger: Logger;
  /** Reads the lifetimes given at issuance (the same clock as the reach step's). */
  clock?: Clock;
}

/**
 * The token endpoint's step for job credentials, after the form guard and before the password
 * throttle (a request refused here never counts as a password attempt):
 * - a password grant with the fields: they are checked (400 `invalid_request`, nothing sent to
 *   Keycloak), removed from the form, and once Keycloak has answered 200, recorded against the
 *   new session before the client gets the answer, which is Keycloak's as it was sent. A
 *   workspace the user does not hold, or a name the user already gave another token, is a 400
 *   too: the session Keycloak opened is ended and the client gets no token.
 * - a refresh grant: refused as Keycloak refuses an expired token once the lifetime given at
 *   issuance is over; its use is noted when Keycloak answers 200.
 * - any password grant Keycloak answers with a bound token (DPoP): the key's thumbprint is
 *   recorded against the new session (token-bindings.ts).
 */
export function jobCredentials(deps: JobCredentialsDeps): RequestHandler {
  return (req, res, next) => {
    const form = formFieldsOf(req);
    const realm = realmOf(req);
    if (!form || req.method !== 'POST' || !realm) {
      next();
      return;
    }
    const read = readJobFields(form, realm, new URLSearchParams(req.url.split('?')[1] ?? ''));
    if ('invalid' in read) {
      sendTokenError(res, fieldRefusal(read.invalid));
      return;
    }
    // Any password grant: the key Keycloak bound the new session's tokens to, for `tokens
    // list`. Held first, so it sees the job credential's refusal (held after) if there is one.
    if (form.get('grant_type') === 'password') {
      holdAnswer(res, (answer) => recordBinding(realm, answer, deps));
    }
    if (read.request) {
      replaceForm(req, withoutJobFields(form));
      holdAnswer(res, (answer) =>
        recordIssued(realm, read.request!, answer, deps).catch((err: unknown) => {
          deps.logger.error({ err }, 'could not record a job credential; none was issued');
          return NOT_RECORDED;
        }),
      );
      next();
      return;
    }
    const session =
      form.get('grant_type') === 'refresh_token'
        ? refreshTokenSession(form.get('refresh_token') ?? '')
        : undefined;
    if (session?.userId !== undefined) {
      const { sessionId, userId } = session;
      checkRefresh(req, res, realm, { sessionId, userId }, deps).then((go) => go && next(), next);
      return;
    }
    next();
  };
}

/** The `sid` a JWT names, unverified; undefined when it names none or is no JWT. */
function unverifiedSessionId(token: string): string | undefined {
  try {
    const { sid } = decodeJwt(token);
    return typeof sid === 'string' ? sid : undefined;
  } catch {
    return undefined;
  }
}

function withoutJobFields(form: URLSearchParams): URLSearchParams {
  const kept = new URLSearchParams();
  for (const [key, value] of form) if (!isJobField(key)) kept.append(key, value);
  return kept;
}

/**
 * A refresh grant past the lifetime given at issuance is answered as Keycloak answers an
 * expired token, and its session ended in Keycloak; else it goes on (true), its use noted once
 * Keycloak accepts it (its claims read unverified are Keycloak's when Keycloak accepts them).
 * A refresh token is Keycloak's own HMAC token, which only Keycloak can verify: its session is
 * looked up only once Keycloak accepted it (its 200, held until then as issuance holds its
 * answer), unless this process remembers its reach (then it is refused before Keycloak). So a
 * made-up one costs Keycloak, not the database, and spends no lookup of anyone's; and a
 * fleet's jobs refreshing together from one address (each a session of its own, remembered for
 * the same hour, so the burst repeats hourly) are all served, never 503 for a lookup budget.
 */
async function checkRefresh(
  req: IncomingMessage,
  res: ServerResponse,
  realm: string,
  { sessionId, userId }: { sessionId: string; userId: string },
  deps: JobCredentialsDeps,
): Promise<boolean> {
  const now = () => (deps.clock ?? systemClock).now();
  const endExpired = async () => {
    await deps.endSession(realm, sessionId).catch((err: unknown) => {
      deps.logger.warn({ err }, 'could not end an expired job credential in Keycloak');
    });
    return EXPIRED;
  };
  const remembered = deps.reach.rememberedReachOf(sessionId);
  if (remembered === undefined) {
    holdAnswer(res, async (answer) => {
      if (answer.status !== 200) return undefined;
      const reach = await deps.reach.confirmedReachOf(sessionId);
      return reach && reachExpired(reach, now()) ? endExpired() : undefined;
    });
  } else if (remembered.reach && reachExpired(remembered.reach, now())) {
    sendTokenError(res, await endExpired());
    return false;
  }
  res.once('finish', () => {
    if (res.statusCode === 200) deps.reach.noteUse({ sessionId, realm, userId }, req);
  });
  return true;
}

/** A job credential's fields refused, before Keycloak or once it issued the token. */
const fieldRefusal = (description: string): Replacement => ({
  status: 400,
  error: 'invalid_request',
  description,
});
/** A refresh grant past the lifetime given at issuance: as Keycloak refuses an expired token. */
const EXPIRED: Replacement = {
  status: 400,
  error: 'invalid_grant',
  description: 'Token is not active',
};
const notYours = (foreign: readonly string[]) =>
  `${JOB_FIELDS.workspaces}: not a workspace of yours: ${foreign.join(', ')}.`;
const nameTaken = (name: string) =>
  `${JOB_FIELDS.name}: you have a refresh token named ${name} already; revoke it first.`;

/** How `readJobFields` refuses `form` (an example for the document). */
function refusalOf(form: Record<string, string>): string {
  const read = readJobFields(new URLSearchParams(form), 'acme');
  if (!('invalid' in read)) throw new Error(`not refused: ${JSON.stringify(form)}`);
  return read.invalid;
}

/**
 * How the token endpoint refuses a job credential's fields, before Keycloak or once it issued
 * the token, and a refresh past its lifetime: examples for the OpenAPI document (api/openapi.ts).
 */
export const JOB_CREDENTIAL_REFUSALS: readonly Replacement[] = [
  fieldRefusal(refusalOf({ grant_type: 'password', [JOB_FIELDS.expiresIn]: '30' })),
  fieldRefusal(refusalOf({ grant_type: 'refresh_token', [JOB_FIELDS.readOnly]: 'true' })),
  fieldRefusal(notYours(['ws9'])),
  fieldRefusal(nameTaken('nightly')),
  EXPIRED,
];

/** The fields could not be recorded (the database, or the new token, failed us): none issued. */
const NOT_RECORDED: Replacement = {
  status: 503,
  error: 'temporarily_unavailable',
  description: 'The token could not be recorded; none was issued. Retry later.',
};
/** Keycloak's 200 held no access token, or one naming no session: nothing to record it by. */
const NO_ACCESS_TOKEN: Replacement = {
  status: 502,
  error: 'server_error',
  description: 'Keycloak answered no access token.',
};
const NO_SESSION_ID: Replacement = {
  status: 502,
  error: 'server_error',
  description: 'Keycloak answered no session id.',
};

/**
 * The token endpoint's own failures in OAuth's shape, besides Keycloak's answers and the
 * gateway's envelope: the OpenAPI document lists them (api/openapi.ts).
 */
export const TOKEN_ENDPOINT_FAILURES: readonly Replacement[] = [
  UNSETTLED,
  NOT_RECORDED,
  NO_ACCESS_TOKEN,
  NO_SESSION_ID,
];

/**
 * Records a password grant's fields once Keycloak has issued its token: the session id and
 * user from the access token (verified), the workspaces checked against those the user holds.
 */
async function recordIssued(
  realm: string,
  request: JobRequest,
  answer: GrantAnswer,
  deps: JobCredentialsDeps,
): Promise<Replacement | undefined> {
  if (answer.status !== 200) return undefined;
  let accessToken: unknown;
  try {
    accessToken = (JSON.parse(answer.body) as { access_token?: unknown }).access_token;
  } catch {
    accessToken = undefined;
  }
  if (typeof accessToken !== 'string') return NO_ACCESS_TOKEN;
  const principal = await Promise.resolve()
    .then(() => deps.bearer.verify(realm, accessToken))
    .catch(async (err: unknown) => {
      // Keycloak just issued it over our own connection: its unverified session id is Keycloak's,
      // and that session must not outlive a token the client never gets.
      const sid = unverifiedSessionId(accessToken);
      if (sid !== undefined) await deps.endSession(realm, sid).catch(() => undefined);
      throw err;
    });
  const sessionId = principal.sessionId;
  if (!sessionId) return NO_SESSION_ID;
  // The client never gets this session's tokens: Keycloak's session is ended too, so that it
  // is not listed as a refresh token of the user.
  const endSession = () =>
    deps.endSession(realm, sessionId).catch((err: unknown) => {
      deps.logger.warn({ err }, 'could not end a refused job credential in Keycloak');
    });
  const refuse = async (description: string): Promise<Replacement> => {
    await endSession();
    return fieldRefusal(description);
  };
  const held = new Set(workspaceRolesOf(principal));
  const foreign = request.workspaces?.filter((workspace) => !held.has(workspace)) ?? [];
  if (foreign.length > 0) {
    return refuse(notYours(foreign));
  }
  const details: IssuedDetails = {
    sessionId,
    realm,
    userId: principal.userId,
    name: request.name,
    workspaces: request.workspaces,
    readOnly: request.readOnly,
    expiresAt:
      request.expiresInSeconds === undefined
        ? undefined
        : (deps.clock ?? systemClock).now() + request.expiresInSeconds * 1000,
  };
  // A failure of the database leaves no record: the session goes too, unseen by its client.
  const recorded = await recordFreeingName(realm, details, deps).catch(async (err: unknown) => {
    await endSession();
    throw err;
  });
  if (recorded === 'nameTaken') {
    return refuse(nameTaken(request.name ?? ''));
  }
  return undefined;
}

/**
 * Records `details`; when their name is taken by a session Keycloak has ended, frees it and
 * records them again.
 */
async function recordFreeingName(
  realm: string,
  details: IssuedDetails,
  deps: JobCredentialsDeps,
): Promise<'recorded' | 'nameTaken'> {
  const recorded = await deps.store.record(details);
  if (recorded === 'recorded') return recorded;
  const freed = await freedName(realm, details.userId, details.name!, deps);
  return freed ? deps.store.record(details) : recorded;
}

/**
 * Frees `name` when Keycloak has ended the session that holds it without the gateway hearing
 * of it (its refresh token revoked at Keycloak's revoke endpoint, its session ended in the
 * console, or past its idle time): its record is dropped, as listing the refresh tokens drops
 * it, and its access tokens refused (without the record, a replica that never read it would
 * admit the ones still unexpired with their user's whole reach). True when the name is free to
 * record again. The record is read before Keycloak's lists, so a session opened after they were
 * read is never taken for ended. When Keycloak's lists cannot be read within `lookupMs`, the
 * name stays taken (the client is told to revoke it first); the refusal takes what is left of
 * it.
 */
async function freedName(
  realm: string,
  userId: string,
  name: string,
  deps: JobCredentialsDeps,
): Promise<boolean> {
  const holder = (await deps.store.ofUser(realm, userId)).find((row) => row.name === name);
  // Dropped meanwhile (a list, a revocation): free already.
  if (holder === undefined) return true;
  const { sessionId } = holder;
  const started = Date.now();
  const ended = await within(deps.endedSessions(realm, userId, [sessionId]), deps.lookupMs, () => {
    throw new Error(`no answer within ${deps.lookupMs} ms`);
  }).catch((err: unknown) => {
    deps.logger.warn({ err }, "could not read Keycloak's sessions to free a job credential's name");
    return [] as string[];
  });
  if (!ended.includes(sessionId)) return false;
  // Within what is left of the same wait: one call's worth of a password attempt's bound.
  const left = Math.max(deps.lookupMs - (Date.now() - started), 0);
  await deps.refuseEnded(realm, [sessionId], userId, left);
  await deps.store.forget(realm, userId, [sessionId]);
  return true;
}
