/** Whether an organization exists, and whether it is enabled. */
export type OrganizationState = 'enabled' | 'disabled' | 'absent';

/** "Does this organization exist, enabled", answered fast (platform/organization-directory.ts). */
export interface OrganizationLookup {
  /**
   * At once when this process knows the answer, else the promise of the database's. `client`:
   * the asking client's address, whose own share of the database lookups an unknown id spends;
   * past it (or the replica's), an id never seen is refused 503 (AppError `databaseUnavailable`).
   */
  stateOf(id: string, client?: string): OrganizationState | Promise<OrganizationState>;
}
