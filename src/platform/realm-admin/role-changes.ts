import { everyPage, isHttpStatus, type KeycloakAdmin } from '../../keycloak/admin-client.ts';

// What a change to a group or a role takes from whom, read before Keycloak makes it (the
// admin listener's endings, auth-proxy/end-access.ts): the members who lose a group's roles, and
// how tokens name a role about to be deleted.

const PAGE = 500;

/**
 * The most admin calls one walk of a group makes (its members' pages, its subgroups'), one
 * after another: some 24,000 members, or 25 subgroups.
 */
export const MAX_GROUP_READS = 50;

/**
 * The ids of the members of a group and of every group below it (which inherit its roles): who
 * loses roles when a role is taken from the group or the group is deleted. Page by page, at most
 * `MAX_GROUP_READS` admin calls: undefined when the group and its subgroups hold more than that
 * reads. An unknown group has none (Keycloak refuses the change then too), and a subgroup deleted
 * during the walk neither (its members no longer inherit), while its siblings are still read.
 */
export async function groupMembers(
  admin: KeycloakAdmin,
  realm: string,
  groupId: string,
): Promise<string[] | undefined> {
  let reads = 0;
  // The admin client answers Keycloak's 404 (no such group) with null, not an error.
  const everyPageOf = <T>(page: (first: number, max: number) => Promise<T[] | null>) =>
    everyPage(PAGE, async (first, max) => {
      if (++reads > MAX_GROUP_READS) throw new TooManyReads();
      return (await page(first, max)) ?? [];
    });
  const members = new Set<string>();
  const groups = [groupId];
  try {
    for (let group = groups.pop(); group !== undefined; group = groups.pop()) {
      const id = group;
      const users = await everyPageOf((first, max) =>
        admin.groups.listMembers({ realm, id, first, max, briefRepresentation: true }),
      );
      for (const user of users) if (user.id) members.add(user.id);
      const children = await everyPageOf((first, max) =>
        admin.groups.listSubGroups({ realm, parentId: id, first, max, briefRepresentation: true }),
      );
      for (const child of children) if (child.id) groups.push(child.id);
    }
  } catch (err) {
    if (err instanceof TooManyReads) return undefined;
    throw err;
  }
  return [...members];
}

/** A walk of a group that reached `MAX_GROUP_READS`. */
class TooManyReads extends Error {}

/**
 * A role as tokens name it (`client`: its client's id, absent for a realm role), from its name
 * (and its client's UUID) or its id: what a deleted role's tokens carry. Undefined when there is
 * none (Keycloak refuses the deletion then too).
 */
export async function roleOf(
  admin: KeycloakAdmin,
  realm: string,
  role: { name: string; clientUuid?: string } | { id: string },
): Promise<{ client?: string; name: string } | undefined> {
  try {
    if (!('id' in role)) {
      if (role.clientUuid === undefined) return { name: role.name };
      const client = await admin.clients.findOne({ realm, id: role.clientUuid });
      return client?.clientId ? { client: client.clientId, name: role.name } : undefined;
    }
    const found = await admin.roles.findOneById({ realm, id: role.id });
    if (!found?.name) return undefined;
    if (!found.clientRole) return { name: found.name };
    const client = await admin.clients.findOne({ realm, id: found.containerId ?? '' });
    return client?.clientId ? { client: client.clientId, name: found.name } : undefined;
  } catch (err) {
    if (isHttpStatus(err, 404)) return undefined;
    throw err;
  }
}

/**
 * The roles of a client (by its UUID) as tokens name them (`client`: its client id): what its
 * holders' tokens carry once the client is deleted. None when there is no such client (Keycloak
 * refuses the deletion then too).
 */
export async function clientRolesOf(
  admin: KeycloakAdmin,
  realm: string,
  clientUuid: string,
): Promise<{ client: string; name: string }[]> {
  try {
    const clientId = (await admin.clients.findOne({ realm, id: clientUuid }))?.clientId;
    if (!clientId) return [];
    const roles = await admin.clients.listRoles({ realm, id: clientUuid });
    return roles.flatMap(({ name }) => (name ? [{ client: clientId, name }] : []));
  } catch (err) {
    if (isHttpStatus(err, 404)) return [];
    throw err;
  }
}
