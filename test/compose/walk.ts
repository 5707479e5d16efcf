import { stripVTControlCharacters } from 'node:util';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { PUBLIC_URL } from './stack.ts';

/** The welcome text demo mode prints (src/demo/welcome.ts), read back from a gateway's log. */
export interface Welcome {
  text: string;
  demoPassword: string;
  consoleUrl: string;
  consoleUser: string;
  consolePassword: string;
  /** The command lines under the header `# <n>.`, as printed. */
  commands(n: number): string[];
  healthCommand: string;
}

export function welcomeOf(output: string): Welcome {
  // `docker compose logs` starts each line with a terminal control sequence (erase line).
  const log = stripVTControlCharacters(output);
  const start = log.lastIndexOf('================ realmgate demo is ready');
  if (start === -1) throw new Error("no welcome text in the gateway's log");
  const text = log.slice(start, log.indexOf('\n====', start + 1));
  const lines = text.split('\n');
  const match = (pattern: RegExp) => {
    const found = pattern.exec(text);
    if (!found) throw new Error(`the welcome text has no ${String(pattern)}`);
    return found;
  };
  const under = (header: (line: string) => boolean) => {
    const at = lines.findIndex(header);
    if (at === -1) return [];
    const end = lines.findIndex((line, i) => i > at && (line.startsWith('#') || line === ''));
    return lines.slice(at + 1, end === -1 ? undefined : end);
  };
  const [, consoleUser, consolePassword] = match(/sign in as (\S+), password (\S+)/);
  return {
    text,
    demoPassword: match(/Demo users \(password (\S+)\):/)[1]!,
    consoleUrl: match(/Keycloak console \(spec 5\.3\): (\S+)/)[1]!,
    consoleUser: consoleUser!,
    consolePassword: consolePassword!,
    commands: (n) => under((line) => line.startsWith(`# ${n}.`)),
    healthCommand: under((line) => line === '# Health:')[0] ?? '',
  };
}

/** An answer with its JSON body ({} when it had none). */
export interface JsonAnswer<T> {
  status: number;
  json: T;
}
/** The platform envelope (spec 2.1); `data` as the caller expects it. */
export interface Envelope<T> {
  data: T;
  message?: string;
  result?: string;
}
/** Keycloak's token endpoint answer (spec 2.2), or its error shape. */
export interface TokenAnswer {
  access_token: string;
  refresh_token: string;
  token_type?: string;
  scope?: string;
  error?: string;
}

async function answer<T>(res: Response): Promise<JsonAnswer<T>> {
  const text = await res.text();
  const json = (text === '' ? {} : JSON.parse(text)) as T;
  return { status: res.status, json };
}

/** A call on the public listener (through the load balancer in the production profile). */
export async function apiCall<T = unknown>(
  path: string,
  authorization: string,
  options: { method?: string; body?: unknown } = {},
): Promise<JsonAnswer<Envelope<T>>> {
  return answer(
    await fetch(`${PUBLIC_URL}${path}`, {
      method: options.method ?? 'GET',
      headers: {
        authorization,
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(30_000),
    }),
  );
}

/** A token request on `realm`'s API client through the gateway's `/auth` at `base`. */
export async function tokenGrant(
  realm: string,
  form: Record<string, string>,
  base = PUBLIC_URL,
): Promise<JsonAnswer<TokenAnswer>> {
  return answer(
    await fetch(`${base}/auth/realms/${realm}/protocol/openid-connect/token`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: apiClientIdOf(realm), ...form }),
      signal: AbortSignal.timeout(30_000),
    }),
  );
}

/** Prints a phase's figures as one block, so that they show in the CI output. */
export function printFigures(
  phase: string,
  figures: Record<string, string | number>,
  suite = 'compose',
): void {
  const lines = [`== ${suite} phase: ${phase}`];
  for (const [name, value] of Object.entries(figures)) lines.push(`  ${name}: ${value}`);
  console.log(lines.join('\n'));
}
