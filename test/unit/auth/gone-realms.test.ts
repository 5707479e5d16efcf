import { describe, expect, it } from 'vitest';
import {
  createGoneRealms,
  MAX_GONE_REALMS,
  REALM_GONE_MEMORY_MS,
} from '../../../src/auth/gone-realms.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/**
 * The memory of realms Keycloak said it does not have, on an injected clock: for how long it
 * answers, what ends it early, and that it stays bounded whatever names come.
 */
describe('the memory of realms Keycloak does not have', () => {
  it('answers for REALM_GONE_MEMORY_MS after Keycloak said so, then asks again', () => {
    const clock = manualClock();
    const gone = createGoneRealms(clock);
    expect(gone.isGone('acme')).toBe(false);
    expect(gone.sawGone('acme')).toBe(true);
    clock.advance(REALM_GONE_MEMORY_MS - 1);
    expect(gone.isGone('acme')).toBe(true);
    expect(gone.isGone('other')).toBe(false);
    clock.advance(1);
    expect(gone.isGone('acme')).toBe(false);
    // Said again: answering again, but no news (logged once).
    expect(gone.sawGone('acme')).toBe(false);
    expect(gone.isGone('acme')).toBe(true);
  });

  it('forgets a realm Keycloak served since (created again under the name)', () => {
    const gone = createGoneRealms(manualClock());
    gone.sawGone('acme');
    gone.sawServed('acme');
    expect(gone.isGone('acme')).toBe(false);
    expect(gone.sawGone('acme')).toBe(true);
  });

  it('tells its listeners each time Keycloak says so', () => {
    const gone = createGoneRealms(manualClock());
    const heard: string[] = [];
    gone.onGone((realm) => heard.push(realm));
    gone.sawGone('acme');
    gone.sawGone('acme');
    expect(heard).toEqual(['acme', 'acme']);
  });

  it('keeps at most MAX_GONE_REALMS realms, the least recently said making way', () => {
    const gone = createGoneRealms(manualClock());
    for (let i = 0; i <= MAX_GONE_REALMS; i++) gone.sawGone(`org-${i}`);
    expect(gone.isGone('org-0')).toBe(false);
    expect(gone.isGone('org-1')).toBe(true);
    expect(gone.isGone(`org-${MAX_GONE_REALMS}`)).toBe(true);
  });
});
