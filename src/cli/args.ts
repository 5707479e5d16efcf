import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Command, TokenLifetimes } from './commands.ts';
import type { LoginSelector } from './credentials.ts';
import { CliError, usageError } from './errors.ts';
import {
  checkOrganization,
  checkRealm,
  checkWorkspace,
  parseDuration,
  parseFlag,
  parseTimestamp,
} from './values.ts';

/** The first word of every command; `help <group>` and usage errors show that group only. */
export const COMMAND_GROUPS = [
  'org',
  'workspace',
  'user',
  'operation',
  'lifetimes',
  'realms',
  'login',
  'token',
  'tokens',
  'logout',
] as const;

/** A command's arguments after the generic checks (counts, duplicates, empty values). */
interface Args {
  /** The positional at `index`; always present, the count was checked. */
  at(index: number): string;
  /** The optional positional after the required ones, if given. */
  optional(): string | undefined;
  one(option: string): string | undefined;
  many(option: string): string[];
  /** Whether a boolean option was given. */
  has(option: string): boolean;
}

interface CommandSpec {
  positionals: string[];
  /** One more positional that may be left out (`tokens revoke <id>`). */
  optional?: string;
  single?: string[];
  multiple?: string[];
  /** Boolean options: `--otp`, never `--otp=<value>`. */
  flags?: string[];
  build(args: Args): Command;
}

/** `--realm` and `--user`: which stored login a token command uses. */
const SELECTOR_OPTIONS = ['realm', 'user'];

// Keycloak session ids (the `id` of tokens list): UUIDs, or base64url-like on newer versions.
const SESSION_ID = /^[A-Za-z0-9._~-]{1,128}$/;

const LIFETIME_OPTIONS = {
  access: 'access_token_lifespan',
  'client-idle': 'client_session_idle_timeout',
  'client-max': 'client_session_max_lifespan',
  'offline-idle': 'offline_session_idle_timeout',
  'offline-max': 'offline_session_max_lifespan',
} as const satisfies Record<string, keyof TokenLifetimes>;

const COMMANDS: Record<string, CommandSpec> = {
  'org create': {
    positionals: ['org'],
    single: ['name'],
    build: (args) => {
      const org = checkOrganization(args.at(0));
      return { name: 'org create', org, displayName: args.one('name') ?? org };
    },
  },
  'org list': { positionals: [], build: () => ({ name: 'org list' }) },
  'org get': {
    positionals: ['org'],
    build: (args) => ({ name: 'org get', org: checkOrganization(args.at(0)) }),
  },
  'org delete': {
    positionals: ['org'],
    flags: ['yes'],
    build: (args) => ({
      name: 'org delete',
      org: checkOrganization(args.at(0)),
      confirmed: args.has('yes'),
    }),
  },
  'org disable': {
    positionals: ['org'],
    build: (args) => ({ name: 'org disable', org: checkOrganization(args.at(0)) }),
  },
  'org enable': {
    positionals: ['org'],
    build: (args) => ({ name: 'org enable', org: checkOrganization(args.at(0)) }),
  },
  'workspace list': {
    positionals: ['org'],
    build: (args) => ({ name: 'workspace list', org: checkOrganization(args.at(0)) }),
  },
  'workspace delete': {
    positionals: ['org', 'ws'],
    build: (args) => ({
      name: 'workspace delete',
      org: checkOrganization(args.at(0)),
      workspace: checkWorkspace(args.at(1)),
    }),
  },
  'workspace create': {
    positionals: ['org', 'ws'],
    single: ['name', 'description'],
    multiple: ['environment'],
    build: (args) => {
      const workspace = checkWorkspace(args.at(1));
      return {
        name: 'workspace create',
        org: checkOrganization(args.at(0)),
        workspace,
        displayName: args.one('name') ?? workspace,
        description: args.one('description'),
        environments: args.many('environment'),
      };
    },
  },
  'user create': {
    positionals: ['realm', 'username'],
    multiple: ['workspace'],
    flags: ['password-stdin', 'otp'],
    build: (args) => {
      const realm = checkRealm(args.at(0));
      const workspaces = args.many('workspace').map(checkWorkspace);
      if (realm === 'master' && workspaces.length > 0) {
        throw usageError('--workspace applies to organization users, not to realm master');
      }
      return {
        name: 'user create',
        realm,
        username: args.at(1),
        passwordFrom: args.has('password-stdin') ? 'stdin' : 'prompt',
        workspaces,
        otp: args.has('otp'),
      };
    },
  },
  'operation add': {
    positionals: ['org', 'ws'],
    single: ['name', 'environment', 'remarks', 'scheduled'],
    build: (args) => {
      const scheduled = args.one('scheduled');
      return {
        name: 'operation add',
        org: checkOrganization(args.at(0)),
        workspace: checkWorkspace(args.at(1)),
        operationName: required(args.one('name'), '--name'),
        environment: args.one('environment'),
        remarks: args.one('remarks'),
        scheduled: scheduled === undefined ? undefined : parseTimestamp(scheduled, '--scheduled'),
      };
    },
  },
  'lifetimes show': {
    positionals: ['realm'],
    build: (args) => ({ name: 'lifetimes show', realm: checkRealm(args.at(0)) }),
  },
  'lifetimes set': {
    positionals: ['realm'],
    single: [...Object.keys(LIFETIME_OPTIONS), 'offline-max-enabled'],
    build: (args) => ({
      name: 'lifetimes set',
      realm: checkRealm(args.at(0)),
      lifetimes: readLifetimes(args),
    }),
  },
  'realms protect': { positionals: [], build: () => ({ name: 'realms protect' }) },
  login: {
    positionals: ['realm', 'username'],
    flags: ['password-stdin', 'otp'],
    build: (args) => ({
      name: 'login',
      realm: checkRealm(args.at(0)),
      username: args.at(1),
      passwordFrom: args.has('password-stdin') ? 'stdin' : 'prompt',
      otp: args.has('otp'),
    }),
  },
  token: {
    positionals: [],
    single: SELECTOR_OPTIONS,
    build: (args) => ({ name: 'token', select: readSelector(args) }),
  },
  'tokens list': {
    positionals: [],
    single: SELECTOR_OPTIONS,
    build: (args) => ({ name: 'tokens list', select: readSelector(args) }),
  },
  'tokens revoke': {
    positionals: [],
    optional: 'id',
    single: SELECTOR_OPTIONS,
    flags: ['all'],
    build: (args) => {
      const id = args.optional();
      if ((id === undefined) === !args.has('all')) {
        throw usageError('tokens revoke takes either an <id> or --all');
      }
      if (id !== undefined && !SESSION_ID.test(id)) throw usageError(`invalid token id '${id}'`);
      return { name: 'tokens revoke', select: readSelector(args), id };
    },
  },
  logout: {
    positionals: [],
    single: SELECTOR_OPTIONS,
    build: (args) => ({ name: 'logout', select: readSelector(args) }),
  },
};

/** Commands of one word, whose second word is an argument (`login <realm> ...`). */
const SINGLE_WORD_COMMANDS = new Set(['login', 'token', 'logout']);

/**
 * Parses `realmgate`'s arguments (without `node` and the script). `--help`/`-h` anywhere before
 * `--` wins over everything else, so a half-typed command still shows how to finish it.
 * Throws a usage `CliError` for anything it cannot turn into a `Command`.
 */
export function parseCommandLine(argv: readonly string[]): Command {
  const end = argv.indexOf('--');
  const flags = end === -1 ? argv : argv.slice(0, end);
  if (argv[0] === 'help') return { name: 'help', group: groupOf(argv[1]) };
  if (flags.includes('--help') || flags.includes('-h')) {
    return { name: 'help', group: groupOf(argv[0]) };
  }
  if (flags.includes('--version')) return { name: 'version' };
  refuseSecretOptions(flags, groupOf(argv[0]));
  const [group, action, ...rest] = argv;
  if (group === undefined) throw usageError('missing command');
  // Only the name before `=`: the value could be a password typed in the wrong place.
  if (group.startsWith('-')) {
    throw usageError(`unexpected option ${group.split('=')[0]}: options go after the command`);
  }
  if (SINGLE_WORD_COMMANDS.has(group)) {
    const single = COMMANDS[group]!;
    return withGroup(group, () => single.build(readArgs(argv.slice(1), single)));
  }
  const spec = COMMANDS[`${group} ${action}`];
  if (spec) return withGroup(group, () => spec.build(readArgs(rest, spec)));
  if (groupOf(group) === undefined) throw usageError(`unknown command '${group}'`);
  const problem =
    action === undefined ? `missing ${group} command` : `unknown command '${group} ${action}'`;
  throw usageError(problem, group);
}

/** Options that once took a secret, and what replaced each. */
const SECRET_OPTIONS: Record<string, string> = {
  '--password': 'type it at the prompt (no echo), or pipe it in with --password-stdin',
  '--otp-secret': 'use --otp to have a fresh secret generated and printed once',
};

/**
 * Refuses secrets on the command line, where `ps` and shell history see them, whichever command
 * they were given to. Only the option's name is echoed, never the value after it.
 */
function refuseSecretOptions(flags: readonly string[], group: string | undefined): void {
  for (const word of flags) {
    const name = word.split('=')[0]!;
    const instead = Object.hasOwn(SECRET_OPTIONS, name) ? SECRET_OPTIONS[name] : undefined;
    if (instead !== undefined) {
      throw usageError(
        `${name} is refused: secrets are never taken from the command line, where ps and ` +
          `shell history see them; ${instead}`,
        group,
      );
    }
  }
}

function groupOf(word: string | undefined): string | undefined {
  return COMMAND_GROUPS.find((group) => group === word);
}

/** Usage errors of a known command show that command's usage lines. */
function withGroup(group: string, parse: () => Command): Command {
  try {
    return parse();
  } catch (error) {
    if (error instanceof CliError && error.kind === 'usage' && error.group === undefined) {
      throw usageError(error.message, group);
    }
    throw error;
  }
}

function readArgs(argv: string[], spec: CommandSpec): Args {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const name of spec.single ?? []) options[name] = { type: 'string' };
  for (const name of spec.multiple ?? []) options[name] = { type: 'string', multiple: true };
  for (const name of spec.flags ?? []) options[name] = { type: 'boolean' };
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true, tokens: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) throw error;
    // node:util's messages name the option, never its value; drop its advice about `--`.
    throw usageError((error as Error).message.split('. To specify')[0]!);
  }
  for (const name of spec.single ?? []) {
    const count = parsed.tokens.filter((t) => t.kind === 'option' && t.name === name).length;
    if (count > 1) throw usageError(`--${name} given more than once`);
  }
  for (const [name, value] of Object.entries(parsed.values)) {
    if ([value].flat().includes('')) throw usageError(`--${name} must not be empty`);
  }
  const { positionals } = parsed;
  const missing = spec.positionals[positionals.length];
  if (missing !== undefined) throw usageError(`missing <${missing}>`);
  // Extra words are not echoed: one could be a password that lost its `--password`.
  const most = spec.positionals.length + (spec.optional === undefined ? 0 : 1);
  if (positionals.length > most) throw usageError('too many arguments');
  if (positionals.includes('')) throw usageError('arguments must not be empty');
  return {
    at: (index) => positionals[index]!,
    optional: () => positionals[spec.positionals.length],
    one: (name) => {
      const value = parsed.values[name];
      return typeof value === 'string' ? value : undefined;
    },
    many: (name) => {
      const value = parsed.values[name];
      return Array.isArray(value) ? value.filter((v) => typeof v === 'string') : [];
    },
    has: (name) => parsed.values[name] === true,
  };
}

function readLifetimes(args: Args): Partial<TokenLifetimes> {
  const lifetimes: Partial<TokenLifetimes> = {};
  for (const [option, field] of Object.entries(LIFETIME_OPTIONS)) {
    const value = args.one(option);
    if (value !== undefined) lifetimes[field] = parseDuration(value, `--${option}`);
  }
  const enabled = args.one('offline-max-enabled');
  if (enabled !== undefined) {
    lifetimes.offline_session_max_lifespan_enabled = parseFlag(enabled, '--offline-max-enabled');
  }
  if (Object.keys(lifetimes).length === 0) {
    throw usageError('lifetimes set needs at least one option');
  }
  return lifetimes;
}

function readSelector(args: Args): LoginSelector {
  const realm = args.one('realm');
  const user = args.one('user');
  return {
    ...(realm === undefined ? {} : { realm: checkRealm(realm) }),
    ...(user === undefined ? {} : { user }),
  };
}

function required(value: string | undefined, option: string): string {
  if (value === undefined) throw usageError(`${option} is required`);
  return value;
}
