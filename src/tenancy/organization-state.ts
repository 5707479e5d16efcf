/** Whether an organization exists, and whether it is enabled. */
export type OrganizationState = 'enabled' | 'disabled' | 'absent';

/** "Does this organization exist, enabled", answered fast (platform/organization-directory.ts). */
export interface OrganizationLookup {
  /** At once when this process knows the answer, else the promise of the database's. */
  stateOf(id: string): OrganizationState | Promise<OrganizationState>;
}
