/** What Keycloak needs to reach a PostgreSQL database, split the way its options want it. */
export interface KeycloakDatabase {
  /** `jdbc:postgresql://host:port/database[?params]`, without user or password. */
  jdbcUrl: string;
  username?: string;
  /** Given to Keycloak through `KC_DB_PASSWORD`, never on its command line. */
  password?: string;
  /** The URL with the password masked, for logs and error messages. */
  display: string;
}

/**
 * Reads a PostgreSQL URL (`postgres://user:pass@host:5432/keycloak`, also `postgresql://`) the
 * way libpq-style clients write it, and turns it into Keycloak's `--db-url`/`--db-username`
 * and a password. Query parameters (e.g. `sslmode=require`) are handed to the JDBC driver.
 * Throws an Error whose message never contains the password.
 */
export function parsePostgresUrl(value: string): KeycloakDatabase {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error('must be a URL like postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new Error('must start with postgres:// or postgresql://');
  }
  if (!url.hostname) throw new Error('must name the database host');
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!database || database.includes('/')) {
    throw new Error('must name one database, e.g. postgres://user@host:5432/keycloak');
  }
  const port = url.port || '5432';
  const username = url.username ? decodeURIComponent(url.username) : undefined;
  const password = url.password ? decodeURIComponent(url.password) : undefined;
  const masked = new URL(url.href);
  if (masked.password) masked.password = '***';
  return {
    jdbcUrl: `jdbc:postgresql://${url.hostname}:${port}/${encodeURIComponent(database)}${url.search}`,
    username,
    password,
    display: masked.href,
  };
}
