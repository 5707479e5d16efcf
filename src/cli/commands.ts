import type { TokenLifetimes } from '../keycloak/token-lifetimes.ts';
import type { LoginSelector } from './credentials.ts';
import type { PasswordSource } from './password.ts';
import {
  buildUserRequest,
  USER_LIFECYCLE_USAGE,
  type ReadyUserCommand,
  type UserCommand,
} from './user-commands.ts';

export type { TokenLifetimes };

/** What a command line asks for, already validated. */
export type Command =
  | { name: 'help'; group?: string }
  | { name: 'version' }
  | { name: 'org create'; org: string; displayName: string }
  | { name: 'org list' }
  | { name: 'org get'; org: string }
  /** `confirmed`: `--yes`; else the id must be typed again at a terminal (confirm.ts). */
  | { name: 'org delete'; org: string; confirmed: boolean }
  | { name: 'org disable'; org: string }
  | { name: 'org enable'; org: string }
  | { name: 'workspace list'; org: string }
  | { name: 'workspace delete'; org: string; workspace: string }
  | {
      name: 'workspace create';
      org: string;
      workspace: string;
      displayName: string;
      description?: string;
      environments: string[];
    }
  | {
      name: 'user create';
      realm: string;
      username: string;
      passwordFrom: PasswordSource;
      workspaces: string[];
      /** Generate a TOTP secret, send it and print it once. */
      otp: boolean;
    }
  | {
      name: 'operation add';
      org: string;
      workspace: string;
      operationName: string;
      environment?: string;
      remarks?: string;
      scheduled?: string;
    }
  | { name: 'lifetimes show'; realm: string }
  | { name: 'lifetimes set'; realm: string; lifetimes: Partial<TokenLifetimes> }
  | { name: 'realms protect' }
  | UserCommand
  | SessionCommand;

/** The API client's commands: a stored login and its tokens (session.ts, login.ts). */
export type SessionCommand =
  | {
      name: 'login';
      realm: string;
      username: string;
      passwordFrom: PasswordSource;
      /** Ask for the one-time password before the first try. */
      otp: boolean;
    }
  | { name: 'token'; select: LoginSelector }
  | { name: 'tokens list'; select: LoginSelector }
  /** `id` undefined: `--all`. */
  | { name: 'tokens revoke'; select: LoginSelector; id: string | undefined }
  | { name: 'logout'; select: LoginSelector };

/** A command that maps onto one provisioning API call. */
export type ApiCommand = Exclude<Command, { name: 'help' | 'version' } | SessionCommand>;

/** What `user create` sends but never takes from the command line. */
export interface UserSecrets {
  password: string;
  /** Base32. */
  otpSecret?: string;
}

/** An API command ready to send: `user create` carries the secrets read after parsing. */
export type ReadyCommand =
  | Exclude<ApiCommand, { name: 'user create' } | UserCommand>
  | (Extract<ApiCommand, { name: 'user create' }> & UserSecrets)
  | ReadyUserCommand;

/** One call of the gateway's platform API; `path` is relative to the base URL. */
export interface ApiRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: Record<string, unknown>;
}

/** Maps a command onto the API call that performs it. */
export function buildRequest(command: ReadyCommand): ApiRequest {
  switch (command.name) {
    case 'org create':
      return post('/api/platform/organizations', { id: command.org, name: command.displayName });
    case 'org list':
      return { method: 'GET', path: '/api/platform/organizations' };
    case 'org get':
      return { method: 'GET', path: organizationPath(command.org) };
    case 'org delete': {
      const confirm = `?confirm=${segment(command.org)}`;
      return { method: 'DELETE', path: `${organizationPath(command.org)}${confirm}` };
    }
    case 'org disable':
    case 'org enable':
      return { method: 'POST', path: `${organizationPath(command.org)}/${command.name.slice(4)}` };
    case 'workspace list':
      return { method: 'GET', path: `${organizationPath(command.org)}/workspaces` };
    case 'workspace delete': {
      const workspacePath = `${organizationPath(command.org)}/workspaces/${segment(command.workspace)}`;
      return { method: 'DELETE', path: workspacePath };
    }
    case 'workspace create':
      return post(`${organizationPath(command.org)}/workspaces`, {
        id: command.workspace,
        name: command.displayName,
        ...optional('description', command.description),
        ...(command.environments.length > 0 && { environments: command.environments }),
      });
    case 'user create': {
      const isMaster = command.realm === 'master';
      return post(isMaster ? '/api/platform/users' : `${organizationPath(command.realm)}/users`, {
        username: command.username,
        password: command.password,
        ...(command.workspaces.length > 0 && { workspaces: command.workspaces }),
        ...optional('otp_secret', command.otpSecret),
      });
    }
    case 'operation add': {
      const workspacePath = `${organizationPath(command.org)}/workspaces/${segment(command.workspace)}`;
      return post(`${workspacePath}/operations`, {
        operation_name: command.operationName,
        ...optional('scheduled_date_for_execution', command.scheduled),
        ...optional('environment', command.environment),
        ...optional('remarks', command.remarks),
      });
    }
    case 'lifetimes show':
      return { method: 'GET', path: lifetimesPath(command.realm) };
    case 'lifetimes set':
      return { method: 'PATCH', path: lifetimesPath(command.realm), body: command.lifetimes };
    case 'realms protect':
      return { method: 'POST', path: '/api/platform/brute-force-detection' };
    case 'user list':
    case 'user get':
    case 'user disable':
    case 'user enable':
    case 'user delete':
    case 'user passwd':
    case 'user grant':
    case 'user revoke':
      return buildUserRequest(command);
  }
}

function post(path: string, body: Record<string, unknown>): ApiRequest {
  return { method: 'POST', path, body };
}

/** Leaves absent options out of the body, so the gateway applies its own defaults. */
function optional(key: string, value: string | undefined): Record<string, string> {
  return value === undefined ? {} : { [key]: value };
}

// Ids were validated against a safe alphabet already; encoding keeps that true if it changes.
function segment(id: string): string {
  return encodeURIComponent(id);
}

function organizationPath(org: string): string {
  return `/api/platform/organizations/${segment(org)}`;
}

function lifetimesPath(realm: string): string {
  return realm === 'master'
    ? '/api/platform/token-lifetimes'
    : `${organizationPath(realm)}/token-lifetimes`;
}

const COMMAND_USAGE: Record<string, string[]> = {
  org: [
    'org create <org> [--name <name>]',
    'org list',
    'org get <org>',
    'org delete <org> [--yes]',
    'org disable <org>',
    'org enable <org>',
  ],
  workspace: [
    'workspace create <org> <ws> [--name <name>] [--description <text>]',
    '                 [--environment <name>]...',
    'workspace list <org>',
    'workspace delete <org> <ws>',
  ],
  user: [
    'user create <realm> <username> [--password-stdin] [--workspace <ws>]...',
    '            [--otp]',
    ...USER_LIFECYCLE_USAGE,
  ],
  operation: [
    'operation add <org> <ws> --name <name> [--environment <e>] [--remarks <r>]',
    '              [--scheduled <ISO date>]',
  ],
  lifetimes: [
    'lifetimes show <realm>',
    'lifetimes set <realm> [--access <dur>] [--client-idle <dur>] [--client-max <dur>]',
    '              [--offline-idle <dur>] [--offline-max <dur>]',
    '              [--offline-max-enabled true|false]',
  ],
  realms: ['realms protect'],
  login: ['login <realm> <username> [--password-stdin] [--otp]'],
  token: ['token [--realm <realm>] [--user <username>]'],
  tokens: [
    'tokens list [--realm <realm>] [--user <username>]',
    'tokens revoke <id> | --all [--realm <realm>] [--user <username>]',
  ],
  logout: ['logout [--realm <realm>] [--user <username>]'],
};

const DETAILS = `
<realm> is master (administrators) or an organization id. A user without --workspace has no
workspace role. <dur> is <n>s, <n>m, <n>h, <n>d or plain seconds (1d, 365d, 3600). --scheduled
takes a date (2026-05-01, midnight UTC) or a date-time with zone (2026-05-01T10:00+09:00).
Values starting with "-" are written --option=-value.

org delete removes the organization's realm (its users and sessions), workspaces and operations
for good: it asks for the organization id again at a terminal, or takes --yes (scripts). org
disable refuses every call and login of the organization at once (403-23001) until org enable;
its users, sessions and refresh tokens are kept. workspace delete removes the workspace's roles
and operations.

Secrets are never taken from the command line, where ps and shell history see them. user
create asks twice for the new user's password, without echo, when stdin is a terminal;
--password-stdin reads it from stdin instead, dropping one trailing newline:
  printf '%s\\n' "$PW" | realmgate user create acme alice --password-stdin
--otp turns on two-factor authentication with a fresh 160-bit secret, printed once beside the
new user's fields as "otp_secret" (base32) and "otpauth_uri" (for a QR code). user passwd
reads the new password the same way. user list pages with --first (default 0) and --max (1 to
1000, default 100); --search keeps users whose username, email or name contains the text.
user disable ends the user's sessions and stops their tokens at once; user delete too, then
deletes the user; user revoke stops the user's older tokens (a refreshed one lacks the role).
Keycloak's bootstrap administrator, service accounts and Keycloak administrators are refused.

API clients (spec 5.2): login does the password grant once (scope openid offline_access)
and keeps the refresh token in the credentials file (mode 0600), one entry per gateway URL,
realm and user; it asks for the password without echo, and for the one-time password when
the login is refused (--otp asks for it at once). With --password-stdin, stdin's first line
is the password and an optional second line the one-time password:
  printf '%s\\n%s\\n' "$PW" "$OTP" | realmgate login acme alice --password-stdin
token prints an access token (cached until a minute before it expires):
  curl -H "Authorization: Bearer $(realmgate token)" ...
tokens list|revoke manage the user's refresh tokens (revoke --all: every one of them).
logout revokes the stored login's refresh token alone and forgets it. --realm and --user pick
among stored logins; without them, the most recent login at REALMGATE_URL is used. The other
commands use the most recent master-realm login when no REALMGATE_TOKEN or
REALMGATE_USERNAME is set.

Environment:
  REALMGATE_URL         gateway base URL (default http://localhost:8000)
  REALMGATE_TOKEN       access token of a master-realm user (Bearer), or
  REALMGATE_USERNAME    and REALMGATE_PASSWORD of a master-realm user (Basic; not possible
                        for a user with two-factor authentication)
  REALMGATE_CONFIG_DIR  where credentials.json is kept (default
                        $XDG_CONFIG_HOME/realmgate, else ~/.config/realmgate)

Prints the created or requested record as JSON. Exit status: 0 success, 1 the gateway answered
with an error (a refused login or refresh token included), 2 usage or configuration error,
3 gateway unreachable or silent for 30 s.
`;

/** The full help text (`--help`), or the lines of one command group (`user --help`). */
export function formatHelp(group?: string): string {
  const lines = group === undefined ? Object.values(COMMAND_USAGE).flat() : usageLines(group);
  const intro = 'Usage: realmgate <command> [options]\n\nCommands:\n';
  const tail = '  help, --help, -h   show this text\n  --version          show the version\n';
  return `${intro}${indent(lines)}${group === undefined ? tail : ''}${DETAILS}`;
}

/** The short usage printed after a usage error. */
export function formatShortUsage(group?: string): string {
  const lines = group === undefined ? Object.values(COMMAND_USAGE).flat() : usageLines(group);
  return `Usage:\n${indent(lines)}Run 'realmgate --help' for details.\n`;
}

function usageLines(group: string): string[] {
  return COMMAND_USAGE[group] ?? Object.values(COMMAND_USAGE).flat();
}

const PREFIX = '  realmgate ';

function indent(lines: string[]): string {
  // Continuation lines start with spaces and line up under the command's arguments.
  const prefixOf = (line: string) => (line.startsWith(' ') ? ' '.repeat(PREFIX.length) : PREFIX);
  return lines.map((line) => `${prefixOf(line)}${line}\n`).join('');
}
