import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { describeUnreachable, readAnswerText } from './client.ts';
import { httpUrlOf, realmIssuerOf } from './token-endpoint.ts';
import { objectOf } from './token-fetch.ts';

/** The `/api` segment that names a realm: `platform` for master, the organization's id. */
function apiSegmentOf(realm: string): string {
  return realm === MASTER_REALM ? 'platform' : encodeURIComponent(realm);
}

/** The gateways' addresses learnt by this process, by `REALMGATE_URL` and realm. */
const learnt = new Map<string, Promise<URL | undefined>>();

/**
 * The gateway's own address (its `PUBLIC_URL`, ending with `/`), which its DPoP check and
 * Keycloak compare a proof's URL with, whatever address (`baseUrl`) the CLI reaches it by, as
 * the answer at `baseUrl` names it: the `resource` of the realm's
 * protected-resource metadata (RFC 9728, `/.well-known/oauth-protected-resource/api/<org>`),
 * without its `api/<org>`. From a gateway that publishes none (before 0.3.0), the realm's issuer
 * without its `auth/realms/<realm>`. Undefined when neither has that form or the gateway answers
 * neither. Asked once per process. Nothing authenticates the answer: see canonical-address.ts.
 */
export function learnGatewayAddress(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
): Promise<URL | undefined> {
  const key = `${baseUrl.href} ${realm}`;
  let address = learnt.get(key);
  if (address === undefined) {
    address = learn(baseUrl, realm, timeoutMs);
    learnt.set(key, address);
    address.catch(() => learnt.delete(key));
  }
  return address;
}

async function learn(baseUrl: URL, realm: string, timeoutMs: number): Promise<URL | undefined> {
  const resourcePath = `api/${apiSegmentOf(realm)}`;
  const metadataUrl = new URL(`.well-known/oauth-protected-resource/${resourcePath}`, baseUrl);
  let resource: unknown;
  try {
    const answer = await fetch(metadataUrl, {
      headers: { accept: 'application/json' },
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const metadata = objectOf(await readAnswerText(answer, baseUrl));
    resource = answer.ok ? metadata?.resource : undefined;
  } catch (error) {
    throw describeUnreachable(error, baseUrl, timeoutMs);
  }
  if (typeof resource === 'string') return baseOf(resource, resourcePath);
  // A gateway without the metadata: its realm's issuer names PUBLIC_URL as well. A gateway
  // that answered but can say neither (its Keycloak down: the metadata reads the realm's DPoP
  // switch, the discovery document is Keycloak's): undefined, as for an answer of another form;
  // a cached token is still served, and a proof that names another address than PUBLIC_URL is
  // refused with both addresses named.
  const issuer = await realmIssuerOf(baseUrl, realm, timeoutMs).catch(() => undefined);
  return issuer === undefined
    ? undefined
    : baseOf(issuer, `auth/realms/${encodeURIComponent(realm)}`);
}

/** `url` without `suffix` (and its slash before), ending with `/`; undefined otherwise. */
function baseOf(url: string, suffix: string): URL | undefined {
  const end = `/${suffix}`;
  return url.endsWith(end) ? httpUrlOf(`${url.slice(0, -end.length)}/`) : undefined;
}
