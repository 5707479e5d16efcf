/** Whether an organization exists, and whether it is enabled. */
export type OrganizationState = 'enabled' | 'disabled' | 'absent';

/** "Does this organization exist, enabled", answered fast (platform/organization-directory.ts). */
export interface OrganizationLookup {
  stateOf(id: string): Promise<OrganizationState>;
  /** True when known to exist and be enabled right now, without waiting. */
  isKnown(id: string): boolean;
}
