import { decodeJwt } from 'jose';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { GrantAnswer } from './grant-answer.ts';

/** A session whose tokens Keycloak bound to a key (DPoP): the key's thumbprint (`cnf.jkt`). */
export interface TokenBinding {
  sessionId: string;
  realm: string;
  userId: string;
  jkt: string;
}

/**
 * The thumbprints of bound sessions, kept in the `dpop_jkt` column of the session's row of
 * `refresh_token_details` (so a row dropped with its session takes its binding along).
 */
export interface TokenBindingStore {
  record(binding: TokenBinding): Promise<void>;
  /** The user's bound sessions: thumbprint by session id. */
  ofUser(realm: string, userId: string): Promise<Map<string, string>>;
}

const TABLE = 'refresh_token_details';

export function createTokenBindingStore(db: Knex): TokenBindingStore {
  return {
    async record({ sessionId, realm, userId, jkt }) {
      await db(TABLE)
        .insert({ session_id: sessionId, realm, user_id: userId, dpop_jkt: jkt })
        // The row of a job credential (or a use noted first) keeps its other columns.
        .onConflict('session_id')
        .merge(['dpop_jkt']);
    },
    async ofUser(realm, userId) {
      const rows: Array<{ session_id: string; dpop_jkt: string }> = await db(TABLE)
        .where({ realm, user_id: userId })
        .whereNotNull('dpop_jkt')
        .select('session_id', 'dpop_jkt');
      return new Map(rows.map((row) => [row.session_id, row.dpop_jkt]));
    },
  };
}

/** RFC 7638 SHA-256 thumbprint: 43 base64url characters. */
const JKT = /^[A-Za-z0-9_-]{43}$/;

/**
 * The binding a token endpoint's 200 answer names: the access token's session, user and
 * `cnf.jkt`, read unverified. The answer is Keycloak's own, over the gateway's connection to
 * it, and what is read here only tells the user which key a session is bound to; Keycloak
 * enforces the binding itself. Undefined for an answer with no bound token.
 */
export function bindingOfAnswer(realm: string, answer: GrantAnswer): TokenBinding | undefined {
  if (answer.status !== 200) return undefined;
  try {
    const { access_token: token } = JSON.parse(answer.body) as { access_token?: unknown };
    if (typeof token !== 'string') return undefined;
    const { sid, sub, cnf } = decodeJwt(token);
    const jkt = (cnf as { jkt?: unknown } | undefined)?.jkt;
    if (typeof sid !== 'string' || sid === '' || typeof sub !== 'string' || sub === '') {
      return undefined;
    }
    if (typeof jkt !== 'string' || !JKT.test(jkt)) return undefined;
    return { sessionId: sid, realm, userId: sub, jkt };
  } catch {
    return undefined;
  }
}

/**
 * Records the binding of a password grant's answer, if it has one. A failure to write it is
 * logged and the answer goes on: the binding is Keycloak's, the row only shows it.
 */
export async function recordBinding(
  realm: string,
  answer: GrantAnswer,
  deps: { bindings: TokenBindingStore; logger: Logger },
): Promise<undefined> {
  const binding = bindingOfAnswer(realm, answer);
  if (binding === undefined) return undefined;
  await deps.bindings.record(binding).catch((err: unknown) => {
    deps.logger.warn({ err }, "could not record a session's DPoP key thumbprint");
  });
  return undefined;
}
