import type { Principal } from '../tenancy/principal.ts';

/**
 * The caller each refusal was of, when its credentials were verified before a later step refused
 * it (its reach, its role, a workspace): for the audit log, which names who was refused. Kept
 * beside the error, not in it: the error is what the client is answered with.
 */
const callers = new WeakMap<object, Principal>();

/**
 * `err`, noted as a refusal of `caller` unless a step closer to the refusal noted a caller
 * already (the reach step's knows the session's reach, the admission's does not).
 */
export function refusing<E>(err: E, caller: Principal | undefined): E {
  if (caller !== undefined && typeof err === 'object' && err !== null && !callers.has(err)) {
    callers.set(err, caller);
  }
  return err;
}

/** The verified caller `err` refused; undefined for a refusal of the credentials themselves. */
export function refusedCallerOf(err: unknown): Principal | undefined {
  return typeof err === 'object' && err !== null ? callers.get(err) : undefined;
}
