import { describe, expect, it } from 'vitest';
import { auditExportQuery, auditPageQuery } from '../../../src/audit/audit-log.schemas.ts';
import { downloadListQuery } from '../../../src/audit/download-jobs.schemas.ts';

/**
 * The reader's filters go to PostgreSQL as text, which holds no NUL: a filter that cannot be
 * stored cannot match, and is refused as a bad request rather than failing the query (500).
 */
describe('audit log filters', () => {
  it.each(['actor', 'action', 'workspace'])('refuses a control character in %s', (name) => {
    for (const value of ['a\u0000b', 'a\u0007b', '\ud800']) {
      expect(auditPageQuery.safeParse({ [name]: value }).success, JSON.stringify(value)).toBe(
        false,
      );
      expect(auditExportQuery.safeParse({ [name]: value }).success).toBe(false);
    }
    expect(auditPageQuery.safeParse({ [name]: 'alice.* ü' }).success).toBe(true);
  });

  it("refuses a control character in a download's id", () => {
    expect(downloadListQuery.safeParse({ download_id: 'a\u0000b' }).success).toBe(false);
    expect(downloadListQuery.safeParse({ download_id: '0b6c-1' }).success).toBe(true);
  });
});
