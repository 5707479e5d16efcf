import { isHttpStatus, type KeycloakAdmin } from '../../keycloak/admin-client.ts';

const PAGE = 500;

/**
 * The ids of the members of a group and of every group below it (which inherit its roles): who
 * loses roles when a role is taken from the group or the group is deleted. Page by page; an
 * unknown group has none (Keycloak refuses the change then too).
 */
export async function groupMembers(
  admin: KeycloakAdmin,
  realm: string,
  groupId: string,
): Promise<string[]> {
  const members = new Set<string>();
  const groups = [groupId];
  try {
    for (let group = groups.pop(); group !== undefined; group = groups.pop()) {
      for (let first = 0; ; first += PAGE) {
        const page = await admin.groups.listMembers({
          realm,
          id: group,
          first,
          max: PAGE,
          briefRepresentation: true,
        });
        for (const user of page) if (user.id) members.add(user.id);
        if (page.length < PAGE) break;
      }
      for (let first = 0; ; first += PAGE) {
        const page = await admin.groups.listSubGroups({
          realm,
          parentId: group,
          first,
          max: PAGE,
          briefRepresentation: true,
        });
        for (const child of page) if (child.id) groups.push(child.id);
        if (page.length < PAGE) break;
      }
    }
  } catch (err) {
    if (isHttpStatus(err, 404)) return [...members];
    throw err;
  }
  return [...members];
}
