/**
 * The account a user name names, as Keycloak reads it: user names are case-insensitive and
 * trimmed, so ` Alice` and `alice` are one account (for the throttle and the failed-login
 * memory alike).
 */
export function accountNameOf(username: string): string {
  return username.trim().toLowerCase();
}
