/**
 * The account a user name names, as Keycloak reads it: user names are case-insensitive and
 * trimmed, so ` Alice` and `alice` are one account (for the throttle, the failed-login memory
 * and the bootstrap administrator's guard alike).
 */
export function accountNameOf(username: string): string {
  return trimmedAsJava(username).toLowerCase();
}

/**
 * `username` without what Java's `String.trim()` strips, as Keycloak's login forms do: every
 * code unit up to U+0020 at either end, control characters included. JavaScript's `trim()`
 * keeps U+0001-U+0008 and U+000E-U+001F, so `admin\u0001` would be another name here and
 * `admin` to Keycloak (and strips Unicode spaces Java keeps, which Keycloak reads as part of
 * the name).
 */
function trimmedAsJava(username: string): string {
  let start = 0;
  let end = username.length;
  while (start < end && username.charCodeAt(start) <= 0x20) start++;
  while (end > start && username.charCodeAt(end - 1) <= 0x20) end--;
  return username.slice(start, end);
}
