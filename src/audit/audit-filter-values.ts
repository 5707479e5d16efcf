// The closed lists of the reader's filters and formats, for the API's schemas
// (audit-log.schemas.ts) and the CLI (cli/audit-filters.ts) alike; no zod here, so the CLI's
// bundle does not carry it.

export const AUDIT_OUTCOMES = ['success', 'failure'] as const;

/** How a caller presented its credentials (`none`: it did not; `other`: an unknown scheme). */
export const CREDENTIAL_KINDS = ['basic', 'bearer', 'dpop', 'none', 'other'] as const;

/** A page's order: newest first unless asked otherwise ("what happened" is about the latest). */
export const AUDIT_ORDERS = ['desc', 'asc'] as const;

export type AuditOrder = (typeof AUDIT_ORDERS)[number];

export const AUDIT_EXPORT_FORMATS = ['jsonl', 'csv', 'ocsf'] as const;

export type AuditExportFormat = (typeof AUDIT_EXPORT_FORMATS)[number];

/** The media type of each export format: what the API sends, and what the CLI takes. */
export const AUDIT_EXPORT_MEDIA_TYPES: Readonly<Record<AuditExportFormat, string>> = {
  jsonl: 'application/x-ndjson',
  csv: 'text/csv',
  ocsf: 'application/x-ndjson',
};

/** Records a page may hold. */
export const AUDIT_PAGE_MAX = 1000;
