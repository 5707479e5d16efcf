import type { ApiRequest } from './client.ts';
import type { CommandOutput, RunContext } from './io.ts';

/** One option of a command, as parsed and as shown in the usage. */
export interface OptionSpec {
  /**
   * The value's name in the usage (`--name <name>`); absent for a flag (`--yes`), which takes
   * no value. A list of choices (`true|false`) is shown as it is.
   */
  value?: string;
  /** May be given more than once (`[--environment <name>]...`); `many()` reads every value. */
  repeat?: boolean;
  /** Shown without brackets; leaving it out is a usage error. */
  required?: boolean;
}

/** A command's arguments after the generic checks (counts, duplicates, empty values). */
export interface Args {
  /** The positional at `index`; always present, the count was checked. */
  at(index: number): string;
  /** The optional positional after the required ones, if given. */
  optional(): string | undefined;
  one(option: string): string | undefined;
  many(option: string): string[];
  /** Whether a flag was given. */
  has(option: string): boolean;
}

/** `'get|delete'` → `'get' | 'delete'`. */
type Alternatives<T extends string> = T extends `${infer A}|${infer B}` ? A | Alternatives<B> : T;

/** The commands a declared name stands for: `'user get|delete'` → `'user get' | 'user delete'`. */
export type NamesOf<N extends string> = N extends `${infer G} ${infer V}`
  ? `${G} ${Alternatives<V>}`
  : N;

/** A parsed command: its name and the fields its declaration's `parse` made. */
export type Named<N extends string, F> = F & { name: NamesOf<N> };

/** The fields of a command that has none (`org list`). */
export type NoFields = Record<never, never>;

/** What every command declares: its words, its arguments and what their values mean. */
export interface Declaration<N extends string, F> {
  /** The command's words; `user get|delete` declares `user get` and `user delete` alike. */
  name: N;
  positionals?: readonly string[];
  /** One more positional that may be left out if the flag `or` is given instead. */
  optional?: { name: string; or: string };
  options?: Readonly<Record<string, OptionSpec>>;
  /** Checks the values and turns them into the command's fields (none when absent). */
  parse?(args: Args): F;
}

/** A parsed command as the table's users see it; its entry knows the rest of its shape. */
export interface ParsedCommand {
  readonly name: string;
}

/** One row of the command table (commands.ts), whatever the command's fields. */
export interface CommandEntry {
  /** The declared name, alternatives included: `user get|disable|enable|delete`. */
  readonly name: string;
  /** The commands it stands for: `user get`, `user disable`, ... */
  readonly names: readonly string[];
  readonly positionals: readonly string[];
  readonly optional: { name: string; or: string } | undefined;
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** The command `name` (one of `names`) with the fields of `args`. */
  parse: (name: string, args: Args) => ParsedCommand;
  run: (command: ParsedCommand, context: RunContext) => Promise<CommandOutput>;
  /** API commands only: the call that performs a command, secrets already read. */
  request?: (command: ParsedCommand) => ApiRequest;
}

/** The commands that `name` declares (see `NamesOf`). */
export function namesOf(name: string): string[] {
  const space = name.indexOf(' ');
  if (space === -1) return name.split('|');
  const group = name.slice(0, space);
  return name
    .slice(space + 1)
    .split('|')
    .map((verb) => `${group} ${verb}`);
}

/**
 * The table row of a declaration, with what running a command of it does. `run` and `request`
 * get back a command that this row's own `parse` made, so they may read it with its real shape.
 */
export function entryOf<N extends string, F>(
  declaration: Declaration<N, F>,
  behaviour: {
    run: (command: Named<N, F>, context: RunContext) => Promise<CommandOutput>;
    request?: (command: Named<N, F>) => ApiRequest;
  },
): CommandEntry {
  const { name, positionals = [], optional, options = {} } = declaration;
  const { run, request } = behaviour;
  return {
    name,
    names: namesOf(name),
    positionals,
    optional,
    options,
    parse: (commandName, args) => ({ ...declaration.parse?.(args), name: commandName }),
    run: (command, context) => run(command as Named<N, F>, context),
    ...(request && { request: (command: ParsedCommand) => request(command as Named<N, F>) }),
  };
}

/** A command that runs on its own terms (`login`, `token`, ...): `run` says what it prints. */
export function sessionCommand<N extends string, F = NoFields>(
  spec: Declaration<N, F> & {
    run(command: Named<N, F>, context: RunContext): Promise<CommandOutput>;
  },
): CommandEntry {
  return entryOf(spec, { run: (command, context) => spec.run(command, context) });
}
