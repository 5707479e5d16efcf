import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Args, CommandEntry, ParsedCommand } from './command-spec.ts';
import { COMMAND_GROUPS, commandNamed } from './commands.ts';
import { CliError, usageError } from './errors.ts';

/** `help [group]`, `--help` or `-h`: the help of every command, or of one group. */
export interface HelpCommand {
  name: 'help';
  group?: string;
}

/** What a command line asks for, already validated. */
export type Command = HelpCommand | { name: 'version' } | ParsedCommand;

/**
 * Parses `realmgate`'s arguments (without `node` and the script) against the command table.
 * `--help`/`-h` anywhere before `--` wins over everything else, so a half-typed command still
 * shows how to finish it. Throws a usage `CliError` for anything it cannot turn into a command.
 */
export function parseCommandLine(argv: readonly string[]): Command {
  const end = argv.indexOf('--');
  const flags = end === -1 ? argv : argv.slice(0, end);
  if (argv[0] === 'help') return { name: 'help', group: knownGroup(argv[1]) };
  if (flags.includes('--help') || flags.includes('-h')) {
    return { name: 'help', group: knownGroup(argv[0]) };
  }
  if (flags.includes('--version')) return { name: 'version' };
  refuseSecretOptions(flags, knownGroup(argv[0]));
  const [group, action] = argv;
  if (group === undefined) throw usageError('missing command');
  // Only the name before `=`: the value could be a password typed in the wrong place.
  if (group.startsWith('-')) {
    throw usageError(`unexpected option ${group.split('=')[0]}: options go after the command`);
  }
  // A command of one word (`login <realm> ...`) takes its second word as an argument.
  const single = commandNamed(group);
  if (single) return withGroup(group, () => single.parse(group, readArgs(argv.slice(1), single)));
  const name = `${group} ${action}`;
  const entry = action === undefined ? undefined : commandNamed(name);
  if (entry) return withGroup(group, () => entry.parse(name, readArgs(argv.slice(2), entry)));
  // An unknown word is not echoed either (a password typed where a command goes); the usage
  // shown with the error lists the words that would do.
  if (knownGroup(group) === undefined) {
    throw usageError('unknown command: the usage below lists the commands');
  }
  const problem =
    action === undefined
      ? `missing ${group} command`
      : `unknown ${group} command: the usage below lists them`;
  throw usageError(problem, group);
}

/** Whether `command` asks for help (no command of the table is called `help`). */
export function isHelp(command: Command): command is HelpCommand {
  return command.name === 'help';
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

function knownGroup(word: string | undefined): string | undefined {
  return COMMAND_GROUPS.find((group) => group === word);
}

/** Usage errors of a known command show that command's usage lines. */
function withGroup(group: string, parse: () => ParsedCommand): ParsedCommand {
  try {
    return parse();
  } catch (error) {
    if (error instanceof CliError && error.kind === 'usage' && error.group === undefined) {
      throw usageError(error.message, group);
    }
    throw error;
  }
}

/** The arguments after the command's words, checked against its declaration. */
function readArgs(argv: string[], entry: CommandEntry): Args {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, option] of Object.entries(entry.options)) {
    options[name] =
      option.value === undefined
        ? { type: 'boolean' }
        : { type: 'string', ...(option.repeat && { multiple: true }) };
  }
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true, tokens: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) throw error;
    // node:util's messages name the option, never its value; drop its advice about `--`.
    throw usageError((error as Error).message.split('. To specify')[0]!);
  }
  const { positionals, tokens, values } = parsed;
  for (const [name, option] of Object.entries(entry.options)) {
    const count = tokens.filter((t) => t.kind === 'option' && t.name === name).length;
    if (count > 1 && option.value !== undefined && !option.repeat)
      throw usageError(`--${name} given more than once`);
  }
  for (const [name, value] of Object.entries(values)) {
    if ([value].flat().includes('')) throw usageError(`--${name} must not be empty`);
  }
  const missing = entry.positionals[positionals.length];
  if (missing !== undefined) throw usageError(`missing <${missing}>`);
  // Extra words are not echoed: one could be a password that lost its `--password`.
  const { optional } = entry;
  if (positionals.length > entry.positionals.length + (optional ? 1 : 0)) {
    throw usageError('too many arguments');
  }
  if (positionals.includes('')) throw usageError('arguments must not be empty');
  if (
    optional &&
    positionals.length > entry.positionals.length === (values[optional.or] === true)
  ) {
    throw usageError(`${entry.name} takes either an <${optional.name}> or --${optional.or}`);
  }
  for (const [name, option] of Object.entries(entry.options)) {
    if (option.required && values[name] === undefined) throw usageError(`--${name} is required`);
  }
  return {
    at: (index) => positionals[index]!,
    optional: () => positionals[entry.positionals.length],
    one: (name) => {
      const value = values[name];
      return typeof value === 'string' ? value : undefined;
    },
    many: (name) => {
      const value = values[name];
      return Array.isArray(value) ? value.filter((v) => typeof v === 'string') : [];
    },
    has: (name) => values[name] === true,
  };
}
