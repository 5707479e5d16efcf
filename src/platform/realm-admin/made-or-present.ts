/**
 * Runs a Keycloak step that makes something (a realm, a role, a mapper) and resolves to whether
 * this call made it. A refused step counts as done when what it was to make exists afterwards:
 * a concurrent twin (another replica, a client's retry) that made it first leaves Keycloak
 * refusing this one with 409, or with 400 "Database operation failed" or 500 when both passed
 * Keycloak's own check, and the thing being there is all the caller wanted. When it is not
 * there, the refusal is a real failure and is thrown as it came.
 */
export async function madeOrPresent(
  make: () => Promise<unknown>,
  isPresent: () => Promise<boolean>,
): Promise<boolean> {
  try {
    await make();
    return true;
  } catch (err) {
    if (await isPresent()) return false;
    throw err;
  }
}
