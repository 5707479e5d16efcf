import { register } from 'node:module';
import type { BearerVerifier } from '../src/auth/bearer/bearer-verifier.ts';
import type { Principal } from '../src/tenancy/principal.ts';
import { workspacesClientIdOf } from '../src/tenancy/identifiers.ts';

export * from '../src/auth/bearer/bearer-verifier.ts';

/**
 * Auth off: every import of src/auth/bearer/bearer-verifier.ts resolves here, a verifier that
 * answers a constant principal holding `BENCH_AUTH_OFF`'s role; the rest is the gateway's own.
 */
export function createBearerVerifier(): BearerVerifier {
  const { organization, workspace } = JSON.parse(process.env.BENCH_AUTH_OFF ?? '{}') as {
    organization: string;
    workspace: string;
  };
  const now = Math.floor(Date.now() / 1000);
  const principal: Omit<Principal, 'realm'> = {
    userId: '00000000-0000-4000-8000-000000000000',
    username: 'bench-auth-off',
    realmRoles: ['default-roles'],
    clientRoles: { [workspacesClientIdOf(organization)]: [workspace] },
    locale: undefined,
    method: 'bearer',
    sessionId: undefined,
    issuedAt: now,
    expiresAt: now + 86_400,
  };
  const byRealm = new Map<string, Principal>();
  const principalOf = (realm: string): Principal => {
    let known = byRealm.get(realm);
    if (!known) byRealm.set(realm, (known = { ...principal, realm }));
    return known;
  };
  // At once, as a token verified before is.
  return { verify: principalOf };
}

/** Call before anything imports src/gateway.ts. */
export function swapInConstantBearer(organization: string, workspace: string): void {
  process.env.BENCH_AUTH_OFF = JSON.stringify({ organization, workspace });
  const self = JSON.stringify(import.meta.url);
  const hooks = `export async function resolve(specifier, context, next) {
    const resolved = await next(specifier, context);
    return resolved.url.includes('/src/auth/bearer/bearer-verifier.ts') && context.parentURL !== ${self}
      ? { ...resolved, url: ${self}, shortCircuit: true }
      : resolved;
  }`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
}
