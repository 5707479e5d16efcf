import { MAX_FIRST, MAX_PAGE } from '../platform/page-bounds.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { apiCommand } from './api-command.ts';
import { optional, post, userPath, usersPath } from './api-requests.ts';
import type { CommandEntry } from './command-spec.ts';
import { usageError } from './errors.ts';
import { createOtpEnrollment, type OtpEnrollment } from './otp.ts';
import { passwordSourceOf, readPassword } from './password.ts';
import { checkOrganization, checkRealm, checkWorkspace } from './values.ts';

/** `user ...`: the users of master or of an organization, and their workspace roles. */
export const USER_COMMANDS: readonly CommandEntry[] = [
  apiCommand({
    name: 'user create',
    positionals: ['realm', 'username'],
    options: {
      'password-stdin': {},
      workspace: { value: 'ws', repeat: true },
      /** Generate a TOTP secret, send it and print it once. */
      otp: {},
    },
    parse: (args) => {
      const realm = checkRealm(args.at(0), '<realm>');
      const workspaces = args.many('workspace').map((ws) => checkWorkspace(ws, '--workspace'));
      if (realm === MASTER_REALM && workspaces.length > 0) {
        throw usageError('--workspace applies to organization users, not to realm master');
      }
      return {
        realm,
        username: args.at(1),
        passwordFrom: passwordSourceOf(args),
        workspaces,
        otp: args.has('otp'),
      };
    },
    prepare: async (command, io) => ({
      password: await readPassword(command.passwordFrom, io, whoOf(command)),
      enrollment: command.otp ? createOtpEnrollment(command.username) : undefined,
    }),
    request: (command) =>
      post(usersPath(command.realm), {
        username: command.username,
        password: command.password,
        ...(command.workspaces.length > 0 && { workspaces: command.workspaces }),
        ...optional('otp_secret', command.enrollment?.secret),
      }),
    print: (data, { enrollment }) => (enrollment ? withEnrollment(data, enrollment) : data),
  }),
  apiCommand({
    name: 'user list',
    positionals: ['realm'],
    options: { first: { value: 'n' }, max: { value: 'n' }, search: { value: 'text' } },
    parse: (args) => {
      const [first, max, search] = [args.one('first'), args.one('max'), args.one('search')];
      return {
        realm: checkRealm(args.at(0), '<realm>'),
        ...(first !== undefined && { first: parseCount(first, '--first', 0, MAX_FIRST) }),
        ...(max !== undefined && { max: parseCount(max, '--max', 1, MAX_PAGE) }),
        ...(search !== undefined && { search }),
      };
    },
    request: (command) => {
      const query = new URLSearchParams();
      if (command.first !== undefined) query.set('first', String(command.first));
      if (command.max !== undefined) query.set('max', String(command.max));
      if (command.search !== undefined) query.set('search', command.search);
      const suffix = query.size > 0 ? `?${query.toString()}` : '';
      return { method: 'GET', path: `${usersPath(command.realm)}${suffix}` };
    },
  }),
  apiCommand({
    name: 'user get|disable|enable|delete',
    positionals: ['realm', 'username'],
    parse: (args) => ({ realm: checkRealm(args.at(0), '<realm>'), username: args.at(1) }),
    request: ({ name, realm, username }) => {
      const path = userPath(realm, username);
      switch (name) {
        case 'user get':
          return { method: 'GET', path };
        case 'user delete':
          return { method: 'DELETE', path };
        case 'user disable':
          return { method: 'POST', path: `${path}/disable` };
        case 'user enable':
          return { method: 'POST', path: `${path}/enable` };
      }
    },
  }),
  apiCommand({
    name: 'user passwd',
    positionals: ['realm', 'username'],
    options: { 'password-stdin': {} },
    parse: (args) => ({
      realm: checkRealm(args.at(0), '<realm>'),
      username: args.at(1),
      passwordFrom: passwordSourceOf(args),
    }),
    prepare: async (command, io) => ({
      password: await readPassword(command.passwordFrom, io, whoOf(command)),
    }),
    request: ({ realm, username, password }) => ({
      method: 'PUT',
      path: `${userPath(realm, username)}/password`,
      body: { password },
    }),
  }),
  apiCommand({
    name: 'user grant|revoke',
    positionals: ['org', 'username', 'ws'],
    parse: (args) => ({
      org: checkOrganization(args.at(0), '<org>'),
      username: args.at(1),
      workspace: checkWorkspace(args.at(2), '<ws>'),
    }),
    request: ({ name, org, username, workspace }) => ({
      method: name === 'user grant' ? 'PUT' : 'DELETE',
      path: `${userPath(org, username)}/workspaces/${encodeURIComponent(workspace)}`,
    }),
  }),
];

/** A whole number in [min, max] given to `option`; else a usage error. */
function parseCount(text: string, option: string, min: number, max: number): number {
  const value = /^[0-9]{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) {
    throw usageError(`${option} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

function whoOf(command: { realm: string; username: string }): string {
  return `${command.username} (realm ${command.realm})`;
}

/**
 * The generated OTP secret is printed once, beside the new user's fields, so `jq -r .otp_secret`
 * finds it; it exists nowhere else the user can read it.
 */
function withEnrollment(data: unknown, enrollment: OtpEnrollment): Record<string, unknown> {
  const otp = { otp_secret: enrollment.secret, otpauth_uri: enrollment.uri };
  const isRecord = typeof data === 'object' && data !== null && !Array.isArray(data);
  return isRecord ? { ...data, ...otp } : { data, ...otp };
}
