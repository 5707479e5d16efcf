import {
  AUDIT_EXPORT_FORMATS,
  AUDIT_ORDERS,
  AUDIT_OUTCOMES,
  CREDENTIAL_KINDS,
} from '../audit/audit-filter-values.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { organizationPath } from './api-requests.ts';
import type { Args, OptionSpec } from './command-spec.ts';
import { usageError } from './errors.ts';
import { parseTimestamp } from './values.ts';

/** One filter of the audit log: its option, and the value the API's query takes. */
interface Filter {
  option: OptionSpec;
  /** The query's value of the option's text; a usage error when it is none. */
  read(text: string, name: string): string;
}

const oneOf =
  (values: readonly string[]) =>
  (text: string, name: string): string => {
    if (!values.includes(text)) throw usageError(`--${name}: expected ${values.join(', ')}`);
    return text;
  };

const asIs = (text: string) => text;

/**
 * The reader's filters, declared once: the options of `audit list` and `audit export`, their
 * usage, and the query each sends (the same names as the API's, docs/audit.md).
 */
export const AUDIT_FILTERS: Readonly<Record<string, Filter>> = {
  from: { option: { value: 'time' }, read: (text, name) => parseTimestamp(text, `--${name}`) },
  to: { option: { value: 'time' }, read: (text, name) => parseTimestamp(text, `--${name}`) },
  actor: { option: { value: 'user' }, read: asIs },
  action: { option: { value: 'action' }, read: asIs },
  outcome: { option: { value: AUDIT_OUTCOMES.join('|') }, read: oneOf(AUDIT_OUTCOMES) },
  workspace: { option: { value: 'ws' }, read: asIs },
  credential: { option: { value: CREDENTIAL_KINDS.join('|') }, read: oneOf(CREDENTIAL_KINDS) },
};

export const FILTER_OPTIONS: Readonly<Record<string, OptionSpec>> = Object.fromEntries(
  Object.entries(AUDIT_FILTERS).map(([name, filter]) => [name, filter.option]),
);

/** The query of the filters given on the command line. */
export function readFilters(args: Args): URLSearchParams {
  const query = new URLSearchParams();
  for (const [name, filter] of Object.entries(AUDIT_FILTERS)) {
    const text = args.one(name);
    if (text !== undefined) query.set(name, filter.read(text, name));
  }
  return query;
}

export const readOrder = (text: string | undefined) =>
  text === undefined ? 'desc' : oneOf(AUDIT_ORDERS)(text, 'order');

export const readFormat = (text: string | undefined) =>
  text === undefined ? 'jsonl' : oneOf(AUDIT_EXPORT_FORMATS)(text, 'format');

export const ORDER_OPTION: OptionSpec = { value: AUDIT_ORDERS.join('|') };
export const FORMAT_OPTION: OptionSpec = { value: AUDIT_EXPORT_FORMATS.join('|') };

/**
 * Where a log is read: master's (`/api/platform/audit-log`), an organization's by a platform
 * administrator, or by the organization's own reader (a stored login of that realm).
 */
export function auditLogPath(log: string, asMember: boolean): string {
  if (log === MASTER_REALM) return '/api/platform/audit-log';
  return asMember
    ? `/api/${encodeURIComponent(log)}/platform/audit-log`
    : `${organizationPath(log)}/audit-log`;
}
