import { describe, expect, it } from 'vitest';
import { readJobFields } from '../../../src/auth-proxy/job-credentials.ts';

const form = (text: string) => new URLSearchParams(`grant_type=password&username=u&${text}`);

describe('readJobFields', () => {
  it('is nothing without the fields', () => {
    expect(readJobFields(form('password=p'), 'acme')).toEqual({ request: undefined });
  });

  it('reads every field; workspaces as a comma list, repeated, or both, once each', () => {
    const read = readJobFields(
      form(
        'realmgate_name=nightly.ci-1&realmgate_workspaces=ws1,ws2&realmgate_workspaces=ws1' +
          '&realmgate_read_only=true&realmgate_expires_in=3600',
      ),
      'acme',
    );
    expect(read).toEqual({
      request: {
        name: 'nightly.ci-1',
        workspaces: ['ws1', 'ws2'],
        readOnly: true,
        expiresInSeconds: 3600,
      },
    });
    expect(readJobFields(form('realmgate_read_only=false'), 'acme')).toEqual({
      request: {
        name: undefined,
        workspaces: undefined,
        readOnly: false,
        expiresInSeconds: undefined,
      },
    });
  });

  it.each([
    ['realmgate_name=', 'realmgate_name'],
    ['realmgate_name=-lead', 'realmgate_name'],
    [`realmgate_name=${'a'.repeat(65)}`, 'realmgate_name'],
    ['realmgate_name=0f9c2e8a-1111-2222-3333-444455556666', 'session id'],
    ['realmgate_workspaces=', 'realmgate_workspaces'],
    ['realmgate_workspaces=ws1,,ws2', 'realmgate_workspaces'],
    ['realmgate_workspaces=ws%2F1', 'realmgate_workspaces'],
    ['realmgate_read_only=1', 'realmgate_read_only'],
    ['realmgate_expires_in=59', 'realmgate_expires_in'],
    ['realmgate_expires_in=1h', 'realmgate_expires_in'],
    ['realmgate_expires_in=0600', 'realmgate_expires_in'],
    ['realmgate_expires_in=99999999999', 'realmgate_expires_in'],
    ['realmgate_name=a&realmgate_name=b', 'more than once'],
    ['realmgate_reach=all', 'Unknown field realmgate_reach'],
    // Keycloak would ignore them: a token of the user's whole reach, taken for a narrow one.
    ['REALMGATE_READ_ONLY=true', 'Unknown field REALMGATE_READ_ONLY'],
    ['Realmgate_workspaces=ws1', 'Unknown field Realmgate_workspaces'],
  ])('refuses %s', (text, said) => {
    const read = readJobFields(form(text), 'acme');
    expect(read).toHaveProperty('invalid');
    expect((read as { invalid: string }).invalid).toContain(said);
  });

  it('takes the fields on the password grant only, and no workspaces for administrators', () => {
    const refresh = new URLSearchParams('grant_type=refresh_token&realmgate_read_only=true');
    expect(readJobFields(refresh, 'acme')).toEqual({
      invalid: 'The realmgate_* fields are taken by the password grant only.',
    });
    expect(readJobFields(form('realmgate_workspaces=ws1'), 'master')).toHaveProperty('invalid');
    expect(readJobFields(form('realmgate_read_only=true'), 'master')).toHaveProperty('request');
  });
});
