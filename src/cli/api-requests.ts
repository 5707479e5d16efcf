import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { ApiRequest } from './client.ts';

// Paths and bodies of the platform API calls, each written once; paths are below the base URL.

// Ids were validated against a safe alphabet already; encoding keeps that true if it changes.
// Usernames are the administrator's free text: encoded, so `/`, `?` or `#` stay one segment.
function segment(id: string): string {
  return encodeURIComponent(id);
}

/** `/api/platform/organizations/<org>`. */
export function organizationPath(org: string): string {
  return `/api/platform/organizations/${segment(org)}`;
}

/** `/api/platform/organizations/<org>/workspaces/<ws>`. */
export function workspacePath(org: string, workspace: string): string {
  return `${organizationPath(org)}/workspaces/${segment(workspace)}`;
}

/**
 * What administrators manage of `realm`, below `/api/platform` for master and below the
 * organization's path for an organization: `rest` starts with `/`.
 */
function managedPath(realm: string, rest: string): string {
  return `${realm === MASTER_REALM ? '/api/platform' : organizationPath(realm)}${rest}`;
}

/** The users of `realm`: master's, or an organization's. */
export function usersPath(realm: string): string {
  return managedPath(realm, '/users');
}

/** One user of `realm`. */
export function userPath(realm: string, username: string): string {
  return `${usersPath(realm)}/${segment(username)}`;
}

/** The forced key-set refresh of `realm`. */
export function signingKeysRefreshPath(realm: string): string {
  return managedPath(realm, '/signing-keys/refresh');
}

/** The token lifetimes of `realm`. */
export function lifetimesPath(realm: string): string {
  return managedPath(realm, '/token-lifetimes');
}

/** A POST with a JSON body. */
export function post(path: string, body: Record<string, unknown>): ApiRequest {
  return { method: 'POST', path, body };
}

/** Leaves absent options out of the body, so the gateway applies its own defaults. */
export function optional(key: string, value: string | undefined): Record<string, string> {
  return value === undefined ? {} : { [key]: value };
}
