import type { AuditRecord } from './audit-chain.ts';
import { COLUMN_OF } from './audit-rows.ts';

/** The fields of a record, in the order a CSV export's columns give them. */
const FIELDS = Object.keys(COLUMN_OF) as (keyof AuditRecord)[];

/** One line of a JSON Lines export: the record as stored, which `realmgate audit verify` reads. */
export function jsonLine(record: AuditRecord): string {
  return `${JSON.stringify(record)}\n`;
}

export const CSV_HEADER = `${FIELDS.join(',')}\r\n`;

/**
 * One row of a CSV export (RFC 4180): quoted where needed; the details as JSON. A cell a
 * spreadsheet would run as a formula (`=`, `+`, `-`, `@` first) is led by `'`: a CSV export is
 * for reading, a JSON Lines one for verifying.
 */
export function csvLine(record: AuditRecord): string {
  return `${FIELDS.map((field) => csvCell(record[field])).join(',')}\r\n`;
}

function csvCell(value: AuditRecord[keyof AuditRecord]): string {
  if (value === null) return '';
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
