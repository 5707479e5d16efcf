/** Node's codes for a connection that could not be made, or was cut. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/**
 * PostgreSQL's SQLSTATEs for "not now": shutting down, not accepting connections yet, or out of
 * connection slots (`max_connections` reached, a role's `CONNECTION LIMIT`: 53300), which a
 * failover or another client's leak causes and which passes like an outage; or a statement
 * cancelled (57014), past DATABASE_STATEMENT_TIMEOUT_MS or by an operator: a server too busy
 * to answer in time.
 */
const SERVER_NOT_AVAILABLE = new Set(['57P01', '57P02', '57P03', '53300', '57014']);

/**
 * A query held back because this process's schema is not current yet (schema-gate.ts): the
 * database answers, but what the query reads may not be there until the migration has run.
 */
export class SchemaNotCurrentError extends Error {
  constructor() {
    super('database: the schema is not migrated yet');
    this.name = 'SchemaNotCurrentError';
  }
}

/**
 * True when an error says the platform database could not be reached or went away, or is not
 * migrated yet, as opposed to a query it refused. Keycloak, Redis and the automation upstream translate their own
 * connection failures where they happen (keycloak-failures.ts, the cache fallback, the
 * forwarder), so a connection failure that reaches the error handler untranslated came from
 * the database pool.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 4; depth++) {
    if (cause instanceof SchemaNotCurrentError) return true;
    const { code } = cause as { code?: unknown };
    if (typeof code === 'string') {
      if (CONNECTION_CODES.has(code) || SERVER_NOT_AVAILABLE.has(code)) return true;
      // SQLSTATE class 08: connection exception.
      if (/^08[0-9A-Z]{3}$/.test(code)) return true;
    }
    // knex's pool gave up waiting for a connection; pg lost one mid-query, or could not make
    // one within DATABASE_CONNECT_TIMEOUT_MS (it sets no code).
    if (cause.name === 'KnexTimeoutError') return true;
    if (cause.message === 'Connection terminated unexpectedly') return true;
    if (cause.message === 'timeout expired') return true;
    cause = cause.cause;
  }
  return false;
}

/**
 * The SQLSTATE of a statement PostgreSQL refused for what it was given, which it will refuse
 * again however often it is sent: a data exception (class 22: a value out of its column's
 * range, text it cannot hold), an integrity constraint violation (23) or a program limit
 * exceeded (54: a value longer than an index holds). Undefined for any other error: the
 * database unavailable (isDatabaseUnavailable), a conflict between transactions (40), a server
 * short of resources (53) or an operator's intervention (57) pass, and are tried again.
 */
export function refusedForGood(err: unknown): string | undefined {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 4; depth++) {
    const { code } = cause as { code?: unknown };
    if (typeof code === 'string' && /^(22|23|54)[0-9A-Z]{3}$/.test(code)) return code;
    cause = cause.cause;
  }
  return undefined;
}
