import { describe, expect, it } from 'vitest';
import { createAudit, type AuditEntry } from '../../../src/http/audit.ts';
import { loggerToLines } from '../../helpers/log-lines.ts';

/** An audit whose lines and kept entries the test reads. */
function auditToLines() {
  const { logger, lines } = loggerToLines();
  const audit = createAudit(logger, () => '127.0.0.1');
  const kept: AuditEntry[] = [];
  audit.keepIn((entry) => kept.push(entry));
  return { audit, lines, kept };
}

describe('audit lines', () => {
  it("bounds every value of an event recorded outside a route, as a route's are", () => {
    const { audit, lines, kept } = auditToLines();
    const long = (c: string) => c.repeat(5000);
    audit.record({
      action: 'login_throttle.start',
      outcome: 'failure',
      result: long('c'),
      reason: long('e'),
      actor: { realm: long('r'), userId: long('i'), username: long('n') },
      target: {
        realm: long('a'),
        username: long('u'),
        many: Array.from({ length: 500 }, () => long('m')),
      },
      realms: Array.from({ length: 500 }, () => long('s')),
      clientAddress: long('d'),
      requestId: long('q'),
    });
    const strings = (value: unknown): string[] =>
      typeof value === 'string'
        ? [value]
        : Array.isArray(value)
          ? value.flatMap(strings)
          : typeof value === 'object' && value !== null
            ? Object.values(value).flatMap(strings)
            : [];
    const [entry] = kept;
    expect(strings(entry).length).toBeGreaterThan(0);
    expect(Math.max(...strings(entry).map((s) => s.length))).toBeLessThanOrEqual(255);
    expect(entry!.target.many).toHaveLength(100);
    // Names from Keycloak, each given its record: none left out.
    expect(entry!.realms).toHaveLength(500);
    expect(entry!.target.username).toBe('u'.repeat(255));
    expect(entry!.actor?.username).toBe('n'.repeat(255));
    expect(lines.join('')).not.toContain('u'.repeat(256));
  });
});
