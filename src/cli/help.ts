import { DEFAULT_PAGE, MAX_PAGE } from '../platform/page-bounds.ts';
import type { CommandEntry, OptionSpec } from './command-spec.ts';
import { COMMANDS, groupOf } from './commands.ts';
import { describeExitStatuses } from './errors.ts';

const PREFIX = '  realmgate ';
/** Usage lines wrap at the width of the help's prose. */
const WIDTH = 95;

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
${MAX_PAGE}, default ${DEFAULT_PAGE}); --search keeps users whose username, email or name begins with the
text (* matches any characters: '*text*' finds it anywhere).
user disable ends the user's sessions and stops their tokens at once; user delete too, then
deletes the user; user revoke stops the user's older tokens (a refreshed one lacks the role).
Keycloak's bootstrap administrator, service accounts and Keycloak administrators are refused.

API clients (spec 5.2): login does the password grant once (scope openid offline_access)
and keeps the refresh token in the credentials file (mode 0600), one entry per gateway URL,
realm and user; it asks for the password without echo, and for the one-time password when
the login is refused (--otp asks for it at once). With --password-stdin, stdin's first line
is the password and an optional second line the one-time password:
  printf '%s\\n%s\\n' "$PW" "$OTP" | realmgate login acme alice --password-stdin
When the realm offers DPoP (its discovery document), login binds the tokens to a P-256 key
of its own, kept beside the refresh token: a copy of the token without the key is refused.
--key-file PATH (or REALMGATE_KEY_FILE) keeps the key in a file of its own instead, made on
this host when absent: the credentials file then holds a token that is useless without it.
--no-dpop keeps bearer tokens (as logins made before do). token prints an access token (cached
until a minute before it expires); a bound one is sent with a fresh proof from proof:
  curl -H "Authorization: DPoP $(realmgate token)" -H "DPoP: $(realmgate proof GET "$U")" "$U"
(a gateway with DPOP_NONCE answers 401 with a DPoP-Nonce header: proof --nonce <it> adds it).
  curl -H "Authorization: Bearer $(realmgate token)" ...     (a --no-dpop login)
A job's own credential: login --name names the refresh token, --workspace (repeatable)
limits it to those workspaces, --read-only to GET, HEAD and OPTIONS, --expires (30d, 12h) ends
it sooner; keep it in a directory of its own (REALMGATE_CONFIG_DIR), so it does not replace
your own login:
  REALMGATE_CONFIG_DIR=./ci realmgate login acme alice --name nightly --workspace ws1 \\
    --read-only --expires 90d
tokens list|revoke manage the user's refresh tokens (revoke <id|name>; --all: every one of
them); list shows each one's name, reach, expiry, last use and key (dpop_jkt; null: bearer),
and for the logins stored here where their key is kept (key_file).
lifetimes set --dpop-required true makes the realm's API client require DPoP.
logout revokes the stored login's refresh token alone and forgets it. --realm and --user pick
among stored logins; without them, the most recent login at REALMGATE_URL is used. The other
commands use the most recent master-realm login when no REALMGATE_TOKEN or
REALMGATE_USERNAME is set.

audit list reads a log (<realm>: master, or an organization), newest first unless --order asc,
page after page (keyset) up to --max records (default 100) or --all, as a table or --json;
audit export writes one to --out as it is read (jsonl, verifiable; csv; ocsf). Their filters
are the API's: --from and --to take a date or a date-time with zone, --to excluded.
  realmgate audit list acme --from 2026-10-01 --to 2026-11-01 --all
An organization's log is read through a stored login of that organization (a user with its
role _og-audit-log) when there is one, else as a platform administrator. audit verify checks
a JSON Lines export offline and names the first record that does not fit, or the last one
of an export cut short (no end line) (exit status 4).

Environment:
  REALMGATE_URL         gateway base URL (default http://localhost:8000)
  REALMGATE_TOKEN       access token of a master-realm user (Bearer), or
  REALMGATE_USERNAME    and REALMGATE_PASSWORD of a master-realm user (Basic; not possible
                        for a user with two-factor authentication)
  REALMGATE_CONFIG_DIR  where credentials.json is kept (default
                        $XDG_CONFIG_HOME/realmgate, else ~/.config/realmgate)
  REALMGATE_KEY_FILE    the key file of login --key-file: where login makes or finds it, and
                        where a login that keeps its key apart reads it on this host
  REALMGATE_CANONICAL_URL  the gateway's PUBLIC_URL, which proofs name: login keeps it
                        instead of learning it from the gateway; a stored login made with
                        another is refused

Prints the created or requested record as JSON. Exit status:
${describeExitStatuses()
  .map(({ status, meaning }) => `  ${status}  ${meaning}\n`)
  .join('')}`;

/** The full help text (`--help`), or the lines of one command group (`user --help`). */
export function formatHelp(group?: string): string {
  const intro = 'Usage: realmgate <command> [options]\n\nCommands:\n';
  const tail = '  help, --help, -h   show this text\n  --version          show the version\n';
  return `${intro}${usageOf(group)}${group === undefined ? tail : ''}${DETAILS}`;
}

/** The short usage printed after a usage error: the lines of `group`, else of every command. */
export function formatShortUsage(group?: string): string {
  return `Usage:\n${usageOf(group)}Run 'realmgate --help' for details.\n`;
}

function usageOf(group: string | undefined): string {
  const inGroup = COMMANDS.filter((entry) => groupOf(entry) === group);
  const entries = inGroup.length > 0 ? inGroup : COMMANDS;
  return entries.flatMap(usageLinesOf).join('');
}

/**
 * The usage of one command, from its declaration: its words, `<positionals>`, then its options,
 * `[bracketed]` unless required. Continuation lines line up under the command's arguments.
 */
function usageLinesOf(entry: CommandEntry): string[] {
  const { optional } = entry;
  const words = [
    ...entry.positionals.map((name) => `<${name}>`),
    ...(optional ? [`<${optional.name}> | --${optional.or}`] : []),
    ...Object.entries(entry.options)
      .filter(([name]) => name !== optional?.or)
      .map(([name, option]) => optionUsage(name, option)),
  ];
  const indent = ' '.repeat(PREFIX.length + entry.name.length + 1);
  const lines: string[] = [];
  let line = `${PREFIX}${entry.name}`;
  for (const word of words) {
    if (line.length + 1 + word.length > WIDTH) {
      lines.push(`${line}\n`);
      line = `${indent}${word}`;
    } else {
      line += ` ${word}`;
    }
  }
  return [...lines, `${line}\n`];
}

function optionUsage(name: string, option: OptionSpec): string {
  const value = option.value?.includes('|')
    ? ` ${option.value}`
    : option.value && ` <${option.value}>`;
  const usage = `--${name}${value ?? ''}`;
  return `${option.required ? usage : `[${usage}]`}${option.repeat ? '...' : ''}`;
}
