import { testEnv } from './test-env.ts';
import type { TestUser } from './keycloak.ts';

export interface ApiResponse {
  status: number;
  body: { data: unknown; message: string; result: string; ts: string };
  headers: Headers;
}

/** `Authorization: Basic` for a user, UTF-8 as RFC 7617 recommends. */
export function basicAuth(user: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${user.username}:${user.password}`, 'utf8').toString('base64')}`;
}

/**
 * Calls the test gateway's API (or the gateway at `init.base`) with the given Authorization
 * header (or none).
 */
export async function callApi(
  path: string,
  authorization?: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string>; base?: string } = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...init.headers };
  if (authorization !== undefined) headers.authorization = authorization;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${init.base ?? testEnv().publicUrl}${path}`, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return {
    status: res.status,
    body: (await res.json()) as ApiResponse['body'],
    headers: res.headers,
  };
}

/** A refresh-then-access token pair for a user, through the gateway's token endpoint. */
export async function accessTokenOf(user: TestUser, totp?: string): Promise<string> {
  const client = user.realm === 'master' ? '_platform-api' : `_${user.realm}-api`;
  const form = new URLSearchParams({
    client_id: client,
    grant_type: 'password',
    scope: 'openid',
    username: user.username,
    password: user.password,
    ...(totp ? { totp } : {}),
  });
  const res = await fetch(
    `${testEnv().publicUrl}/auth/realms/${user.realm}/protocol/openid-connect/token`,
    {
      method: 'POST',
      body: form,
    },
  );
  const json = (await res.json()) as { access_token?: string };
  if (!json.access_token)
    throw new Error(`no access token for ${user.username}: ${JSON.stringify(json)}`);
  return json.access_token;
}
