import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { ApiRequest } from './client.ts';
import {
  entryOf,
  type CommandEntry,
  type Declaration,
  type Named,
  type NoFields,
} from './command-spec.ts';
import type { CliIo } from './io.ts';
import { callAs, resolveCaller } from './stored-login.ts';

/** An administrator's command: one call of the platform API, printed as JSON. */
export interface ApiCommandSpec<N extends string, F, P> extends Declaration<N, F> {
  /**
   * Reads what the command line must not carry (a password) or asks for a confirmation; runs
   * once the credentials were found, so nothing is asked of a caller who cannot go on anyway.
   */
  prepare?(command: Named<N, F>, io: CliIo): Promise<P>;
  /** The one call that performs the command. */
  request(command: Named<N, F> & P): ApiRequest;
  /** What is printed: the answer's data, or what this makes of it. */
  print?(data: unknown, command: Named<N, F> & P): unknown;
}

const NO_CREDENTIALS =
  'no credentials: set REALMGATE_TOKEN, or REALMGATE_USERNAME and REALMGATE_PASSWORD, ' +
  'of a master-realm user, or log in once with realmgate login master <username>';

/** The table row of an API command (see `ApiCommandSpec`). */
export function apiCommand<N extends string, F = NoFields, P = NoFields>(
  spec: ApiCommandSpec<N, F, P>,
): CommandEntry {
  return entryOf(spec, {
    run: async (command, { env, io, timeoutMs }) => {
      // Credentials are read only now (help and version work without them), and before any
      // password is asked for. Without any in the environment, the most recent master-realm
      // login serves: these are administrators' commands.
      const caller = await resolveCaller(env, { realm: MASTER_REALM }, NO_CREDENTIALS);
      // Without `prepare`, P has no fields: the command is ready as it was parsed.
      const ready = { ...command, ...(await spec.prepare?.(command, io)) } as Named<N, F> & P;
      const data = await callAs(caller, spec.request(ready), timeoutMs);
      return { json: spec.print ? spec.print(data, ready) : data };
    },
    request: (command) => spec.request(command as Named<N, F> & P),
  });
}
