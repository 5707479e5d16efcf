/**
 * The page bounds of a user list (`GET .../users?first=&max=`): the API's query schema
 * (users.schemas.ts) and the CLI's `user list` and its help read them. No imports, so the CLI's
 * bundle takes nothing else with them.
 */
export const MAX_PAGE = 1000;
export const DEFAULT_PAGE = 100;
export const MAX_FIRST = 1_000_000_000;
