import { describe, expect, it } from 'vitest';
import { accountNameOf } from '../../../src/auth/account-name.ts';
import { isBootstrapAdmin } from '../../../src/auth/bootstrap-admin.ts';

describe('the account a user name names, as Keycloak reads it', () => {
  it("trims what Java's String.trim() trims, control characters included, and nothing else", () => {
    expect(accountNameOf(' Alice\t')).toBe('alice');
    expect(accountNameOf('\u0001alice\u001f\u0000')).toBe('alice');
    // Unicode spaces are part of the name to Keycloak: another account.
    expect(accountNameOf('alice\u00a0')).toBe('alice\u00a0');
    expect(accountNameOf('\u0001')).toBe('');
  });

  it("knows the bootstrap administrator behind any character a login form's trim drops", () => {
    for (const name of ['admin', ' ADMIN ', 'admin\u0001', '\u0008admin', 'admin\u001f\r\n']) {
      expect(isBootstrapAdmin('admin', 'master', name), JSON.stringify(name)).toBe(true);
    }
    expect(isBootstrapAdmin('admin', 'acme', 'admin\u0001')).toBe(false);
    expect(isBootstrapAdmin('admin', 'master', 'admin\u00a0')).toBe(false);
  });
});
