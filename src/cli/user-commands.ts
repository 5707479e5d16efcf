import type { ApiRequest } from './commands.ts';
import { usageError } from './errors.ts';
import type { PasswordSource } from './password.ts';

/** The user-lifecycle commands (`user list|get|disable|enable|delete|passwd|grant|revoke`). */
export type UserCommand =
  | { name: 'user list'; realm: string; first?: number; max?: number; search?: string }
  | {
      name: 'user get' | 'user disable' | 'user enable' | 'user delete';
      realm: string;
      username: string;
    }
  | { name: 'user passwd'; realm: string; username: string; passwordFrom: PasswordSource }
  | { name: 'user grant' | 'user revoke'; org: string; username: string; workspace: string };

/** `user passwd` once its password has been read (never from the command line). */
export type ReadyUserCommand =
  | Exclude<UserCommand, { name: 'user passwd' }>
  | (Extract<UserCommand, { name: 'user passwd' }> & { password: string });

/** The page bounds of `user list`, as the gateway applies them. */
const MAX_PAGE = 1000;

/** A whole number in [min, max] given to `option`; else a usage error. */
export function parseCount(text: string, option: string, min: number, max: number): number {
  const value = /^[0-9]{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) {
    throw usageError(`${option} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

export const parseFirst = (text: string) => parseCount(text, '--first', 0, 1_000_000_000);
export const parseMax = (text: string) => parseCount(text, '--max', 1, MAX_PAGE);

/** Maps a user-lifecycle command onto its API call. */
export function buildUserRequest(command: ReadyUserCommand): ApiRequest {
  switch (command.name) {
    case 'user list': {
      const query = new URLSearchParams();
      if (command.first !== undefined) query.set('first', String(command.first));
      if (command.max !== undefined) query.set('max', String(command.max));
      if (command.search !== undefined) query.set('search', command.search);
      const suffix = query.size > 0 ? `?${query.toString()}` : '';
      return { method: 'GET', path: `${usersPath(command.realm)}${suffix}` };
    }
    case 'user get':
      return { method: 'GET', path: userPath(command.realm, command.username) };
    case 'user delete':
      return { method: 'DELETE', path: userPath(command.realm, command.username) };
    case 'user disable':
    case 'user enable': {
      const verb = command.name === 'user disable' ? 'disable' : 'enable';
      return { method: 'POST', path: `${userPath(command.realm, command.username)}/${verb}` };
    }
    case 'user passwd':
      return {
        method: 'PUT',
        path: `${userPath(command.realm, command.username)}/password`,
        body: { password: command.password },
      };
    case 'user grant':
    case 'user revoke':
      return {
        method: command.name === 'user grant' ? 'PUT' : 'DELETE',
        path: `${userPath(command.org, command.username)}/workspaces/${encodeURIComponent(command.workspace)}`,
      };
  }
}

function usersPath(realm: string): string {
  return realm === 'master'
    ? '/api/platform/users'
    : `/api/platform/organizations/${encodeURIComponent(realm)}/users`;
}

// Usernames are the administrator's free text: encoded, so `/`, `?` or `#` stay one segment.
function userPath(realm: string, username: string): string {
  return `${usersPath(realm)}/${encodeURIComponent(username)}`;
}

/** Usage lines of the user-lifecycle commands (after `user create`'s). */
export const USER_LIFECYCLE_USAGE = [
  'user list <realm> [--first <n>] [--max <n>] [--search <text>]',
  'user get|disable|enable|delete <realm> <username>',
  'user passwd <realm> <username> [--password-stdin]',
  'user grant|revoke <org> <username> <ws>',
];
