import { apiCommand } from './api-command.ts';
import { optional, organizationPath, post, workspacePath } from './api-requests.ts';
import type { CommandEntry } from './command-spec.ts';
import { confirmOrganizationDeletion } from './confirm.ts';
import { checkOrganization, checkWorkspace, parseTimestamp } from './values.ts';

const ORGANIZATIONS = '/api/platform/organizations';

/** `org ...` and `workspace ...`: organizations and their workspaces. */
export const ORGANIZATION_COMMANDS: readonly CommandEntry[] = [
  apiCommand({
    name: 'org create',
    positionals: ['org'],
    options: { name: { value: 'name' } },
    parse: (args) => {
      const org = checkOrganization(args.at(0), '<org>');
      return { org, displayName: args.one('name') ?? org };
    },
    request: ({ org, displayName }) => post(ORGANIZATIONS, { id: org, name: displayName }),
  }),
  apiCommand({
    name: 'org list',
    request: () => ({ method: 'GET', path: ORGANIZATIONS }),
  }),
  apiCommand({
    name: 'org get',
    positionals: ['org'],
    parse: (args) => ({ org: checkOrganization(args.at(0), '<org>') }),
    request: ({ org }) => ({ method: 'GET', path: organizationPath(org) }),
  }),
  apiCommand({
    name: 'org delete',
    positionals: ['org'],
    options: { yes: {} },
    /** `confirmed`: `--yes`; else the id must be typed again at a terminal (confirm.ts). */
    parse: (args) => ({ org: checkOrganization(args.at(0), '<org>'), confirmed: args.has('yes') }),
    prepare: async ({ org, confirmed }, io) => {
      await confirmOrganizationDeletion(org, confirmed, io);
      return {};
    },
    request: ({ org }) => ({
      method: 'DELETE',
      path: `${organizationPath(org)}?confirm=${encodeURIComponent(org)}`,
    }),
  }),
  apiCommand({
    name: 'org disable',
    positionals: ['org'],
    parse: (args) => ({ org: checkOrganization(args.at(0), '<org>') }),
    request: ({ org }) => ({ method: 'POST', path: `${organizationPath(org)}/disable` }),
  }),
  apiCommand({
    name: 'org enable',
    positionals: ['org'],
    parse: (args) => ({ org: checkOrganization(args.at(0), '<org>') }),
    request: ({ org }) => ({ method: 'POST', path: `${organizationPath(org)}/enable` }),
  }),
  apiCommand({
    name: 'workspace create',
    positionals: ['org', 'ws'],
    options: {
      name: { value: 'name' },
      description: { value: 'text' },
      environment: { value: 'name', repeat: true },
    },
    parse: (args) => {
      const workspace = checkWorkspace(args.at(1), '<ws>');
      return {
        org: checkOrganization(args.at(0), '<org>'),
        workspace,
        displayName: args.one('name') ?? workspace,
        description: args.one('description'),
        environments: args.many('environment'),
      };
    },
    request: (command) =>
      post(`${organizationPath(command.org)}/workspaces`, {
        id: command.workspace,
        name: command.displayName,
        ...optional('description', command.description),
        ...(command.environments.length > 0 && { environments: command.environments }),
      }),
  }),
  apiCommand({
    name: 'workspace list',
    positionals: ['org'],
    parse: (args) => ({ org: checkOrganization(args.at(0), '<org>') }),
    request: ({ org }) => ({ method: 'GET', path: `${organizationPath(org)}/workspaces` }),
  }),
  apiCommand({
    name: 'workspace delete',
    positionals: ['org', 'ws'],
    parse: (args) => ({
      org: checkOrganization(args.at(0), '<org>'),
      workspace: checkWorkspace(args.at(1), '<ws>'),
    }),
    request: ({ org, workspace }) => ({ method: 'DELETE', path: workspacePath(org, workspace) }),
  }),
];

/** `operation add`: an operation in a workspace (the automation API's list). */
export const OPERATION_COMMANDS: readonly CommandEntry[] = [
  apiCommand({
    name: 'operation add',
    positionals: ['org', 'ws'],
    options: {
      name: { value: 'name', required: true },
      environment: { value: 'e' },
      remarks: { value: 'r' },
      scheduled: { value: 'ISO date' },
    },
    parse: (args) => {
      const scheduled = args.one('scheduled');
      return {
        org: checkOrganization(args.at(0), '<org>'),
        workspace: checkWorkspace(args.at(1), '<ws>'),
        operationName: args.one('name')!,
        environment: args.one('environment'),
        remarks: args.one('remarks'),
        scheduled: scheduled === undefined ? undefined : parseTimestamp(scheduled, '--scheduled'),
      };
    },
    request: (command) =>
      post(`${workspacePath(command.org, command.workspace)}/operations`, {
        operation_name: command.operationName,
        ...optional('scheduled_date_for_execution', command.scheduled),
        ...optional('environment', command.environment),
        ...optional('remarks', command.remarks),
      }),
  }),
];
