import { AUDIT_COMMANDS } from './audit-commands.ts';
import type { ApiRequest } from './client.ts';
import type { CommandEntry, ParsedCommand } from './command-spec.ts';
import { ORGANIZATION_COMMANDS, OPERATION_COMMANDS } from './org-commands.ts';
import { REALM_COMMANDS } from './realm-commands.ts';
import { SESSION_COMMANDS } from './session-commands.ts';
import { USER_COMMANDS } from './user-commands.ts';

/**
 * Every command of `realmgate`, each declared once: its arguments, and what it does. Parsing,
 * the usage and help text, the groups and the API call a command makes all come from here; the
 * order is the order of the help.
 */
export const COMMANDS: readonly CommandEntry[] = [
  ...ORGANIZATION_COMMANDS,
  ...USER_COMMANDS,
  ...OPERATION_COMMANDS,
  ...REALM_COMMANDS,
  ...SESSION_COMMANDS,
  ...AUDIT_COMMANDS,
];

const BY_NAME = new Map(COMMANDS.flatMap((entry) => entry.names.map((name) => [name, entry])));

/** The first word of every command; `help <group>` and usage errors show that group only. */
export const COMMAND_GROUPS: readonly string[] = [
  ...new Set(COMMANDS.map((entry) => entry.name.split(' ')[0]!)),
];

/** The entry of the command `name` (`org create`, `login`), if there is one. */
export function commandNamed(name: string): CommandEntry | undefined {
  return BY_NAME.get(name);
}

/** The group a command belongs to: its first word. */
export function groupOf(entry: CommandEntry): string {
  return entry.name.split(' ')[0]!;
}

/**
 * The API call that performs `command` (parsed, with the secrets `prepare` reads already in
 * it); an error for a command that is not one API call (`login`, `token`, ...).
 */
export function buildRequest(command: ParsedCommand): ApiRequest {
  const request = commandNamed(command.name)?.request;
  if (request === undefined) throw new Error(`${command.name} is not an API command`);
  return request(command);
}
