import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import {
  chooseUnit,
  launchChromium,
  saveAndWait,
  screenshot,
  settled,
  signIn,
  typeNumber,
} from '../helpers/browser.ts';
import {
  createOrganizationRealm,
  claimsOf,
  createUser,
  expectAnswerSeconds,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

const HOURS_2 = 2 * 60 * 60;
/**
 * How long the console's steps may take together, less than the test's timeout so the tabs are
 * still open for the screenshots. The one bound of every wait in them: each tab's console load
 * signs in through Keycloak, and on a loaded 2-core machine the sign-in step alone took 15 s,
 * near the 20 s that each of its waits had on its own, while the whole ran in under a third of
 * this: a bound per wait fails a step that is merely slow, with most of the budget left.
 */
const STEPS_BUDGET_MS = 150_000;
const DAYS_30 = 30 * 24 * 60 * 60;

/**
 * Spec 5.3 as an administrator does it, in Debian's Chromium: the spec's console address (an
 * old-console fragment, under another name of the admin listener), Keycloak's bootstrap
 * administrator signing in, then Clients → the API client → Advanced → Advanced settings →
 * Access Token Lifespan, and Realm settings → Sessions → Offline Session Idle / Max. The next
 * password grant through the public listener must show both.
 *
 * The changes are made in an organization realm of this suite's own (reached by the old-console
 * address `#/realms/<org>`), not in `master`: other suites run at the same time and rely on
 * master's lifetimes. The clicks are the same in every realm.
 */
describe('the administrators console (spec 5.3) in a real browser', () => {
  let browser: Browser;
  const pages: Page[] = [];
  let org: string;
  let user: TestUser;
  let restore: (() => Promise<void>) | undefined;
  const admin = () => testEnv().adminUrl;
  const consoleAt = (fragment: string) => `${admin()}/auth/admin/master/console/#${fragment}`;

  beforeAll(async () => {
    org = await createOrganizationRealm();
    user = await createUser(org);
    const kc = await keycloakAdmin();
    const realm = (await kc.realms.findOne({ realm: org }))!;
    const [client] = await kc.clients.find({ realm: org, clientId: apiClientIdOf(org) });
    restore = async () => {
      const again = await keycloakAdmin();
      await again.realms.update(
        { realm: org },
        {
          offlineSessionIdleTimeout: realm.offlineSessionIdleTimeout,
          offlineSessionMaxLifespan: realm.offlineSessionMaxLifespan,
          offlineSessionMaxLifespanEnabled: realm.offlineSessionMaxLifespanEnabled,
        },
      );
      await again.clients.update({ realm: org, id: client!.id! }, client!);
    };
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await restore?.();
  });

  /** A fresh tab: the console page loads anew (its old-address step runs on load). */
  async function open(url: string): Promise<Page> {
    const page = await browser.newPage();
    page.setDefaultTimeout(STEPS_BUDGET_MS);
    pages.push(page);
    const tab = pages.length - 1;
    const note = (what: string) => happenings.push(`${seconds()} s tab ${tab}: ${what}`);
    page.on('pageerror', (err) =>
      note(`page error ${err instanceof Error ? err.message : String(err)}`),
    );
    page.on('requestfailed', (request) =>
      note(`${request.method()} ${request.url()} failed: ${request.failure()?.errorText}`),
    );
    page.on('response', (response) => {
      if (response.status() >= 400) {
        note(`${response.request().method()} ${response.url()} answered ${response.status()}`);
      }
    });
    // Not 'load': the console may already be on its way to the login page by then.
    await page.goto(url, { waitUntil: 'domcontentloaded' });
    return page;
  }

  let started = Date.now();
  const seconds = () => ((Date.now() - started) / 1000).toFixed(1);
  /** The steps as they began and what the tabs met (errors, failed requests), for a failure. */
  const happenings: string[] = [];
  let step = 'start';
  /** Names the step under way, for the failure message. */
  const at = (name: string) => {
    step = name;
    happenings.push(`${seconds()} s step: ${name}`);
  };

  /** `settled`, noted in the timeline when the page was still loading after its wait. */
  async function settle(page: Page): Promise<void> {
    if (!(await settled(page))) happenings.push(`${seconds()} s: a tab still loading after 15 s`);
  }

  /**
   * Runs `steps` within `budgetMs` (less than the test's timeout, so the tabs are still open);
   * on failure saves a screenshot of every tab and prints the step and the screenshots' paths.
   */
  async function withScreenshots(
    name: string,
    budgetMs: number,
    steps: () => Promise<void>,
  ): Promise<void> {
    started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`not done within ${budgetMs} ms`)), budgetMs);
    });
    try {
      await Promise.race([steps(), deadline]);
    } catch (err) {
      const files = await Promise.all(
        pages.map((page, i) => screenshot(page, `${name}-${i}`).catch((e: Error) => e.message)),
      );
      console.error(
        `browser test failed at step "${step}"; what happened:\n${happenings.join('\n')}\n` +
          `screenshots:\n${files.join('\n')}`,
      );
      // The step in the error itself: a CI summary shows the error, not always the log above.
      if (err instanceof Error) err.message = `at step "${step}": ${err.message}`;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  it('signs in at the spec address and changes the lifetimes that the next grant shows', async () => {
    await withScreenshots('console-lifetimes', STEPS_BUDGET_MS, async () => {
      // 1. The spec's address under another name of the admin listener: redirected to
      // ADMIN_PUBLIC_URL, the login stays on the admin listener, `#/realms/master` is mapped.
      const other = consoleAt('/realms/master').replace('127.0.0.1', 'localhost');
      expect(other).not.toBe(consoleAt('/realms/master'));
      at('open the spec address under another host name');
      const first = await open(other);
      expect(new URL(first.url()).origin).toBe(admin());
      at('sign in as the bootstrap administrator');
      await signIn(first, testEnv().keycloakAdminUsername, testEnv().keycloakAdminPassword);
      await first.waitForSelector('[data-testid="rs-sessions-tab"]');
      expect(first.url()).toBe(consoleAt('/master/realm-settings'));

      // 2. Clients → _<org>-api → Advanced → Advanced settings → Access Token Lifespan.
      at('open the clients of the organization realm');
      const clients = await open(consoleAt(`/realms/${org}/clients`));
      const clientLink = `::-p-xpath(//a[normalize-space(.)="${apiClientIdOf(org)}"])`;
      await clients.waitForSelector(clientLink);
      expect(clients.url()).toBe(consoleAt(`/${org}/clients`));
      await settle(clients);
      at('client > Advanced > Access Token Lifespan');
      await clients.click(clientLink);
      await clients.waitForSelector('[data-testid="advancedTab"]');
      await settle(clients);
      await clients.click('[data-testid="advancedTab"]');
      const lifespan = await clients.waitForSelector(
        '[data-testid="token-lifespan-accessTokenLifespan"]',
      );
      await chooseUnit(clients, lifespan!, 'Hours');
      await typeNumber((await lifespan!.waitForSelector('input[type="number"]'))!, 2);
      // The Advanced tab has one Save per section: the first after the field is its section's.
      at('save the Advanced settings section');
      await saveAndWait(
        clients,
        '::-p-xpath(//*[@data-testid="token-lifespan-accessTokenLifespan"]/following::button[@data-testid="OIDCAdvancedSave"][1])',
      );

      // 3. Realm settings → Sessions → Offline Session Idle and Offline Session Max (in days,
      // the unit the realm's 365 days already show).
      at('open the realm settings of the organization realm');
      const settings = await open(consoleAt(`/realms/${org}`));
      await settings.waitForSelector('[data-testid="rs-sessions-tab"]');
      expect(settings.url()).toBe(consoleAt(`/${org}/realm-settings`));
      await settle(settings);
      await settings.click('[data-testid="rs-sessions-tab"]');
      const limited = await settings.waitForSelector('[data-testid="offline-session-max-switch"]');
      if (
        !(await limited!.evaluate((input) => (input as unknown as { checked: boolean }).checked))
      ) {
        await limited!.evaluate((input) => (input as unknown as { click(): void }).click());
      }
      const idle = await settings.waitForSelector('[data-testid="offline-session-idle-input"]');
      await typeNumber(idle!, 30);
      const max = await settings.waitForSelector('[data-testid="offline-session-max-input"]');
      await typeNumber(max!, 30);
      at('save the Sessions tab');
      await saveAndWait(settings, '[data-testid="sessions-tab-save"]');
    });

    // 4. The next password grant through the public listener shows both.
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const access = claimsOf(grant.json.access_token);
    expect(Number(access.exp) - Number(access.iat)).toBe(HOURS_2);
    expectAnswerSeconds(grant.json.expires_in, HOURS_2);
    // An offline token's life counts from its session's start: a second may have gone by.
    expect(grant.json.refresh_expires_in).toBeGreaterThan(DAYS_30 - 10);
    expect(grant.json.refresh_expires_in).toBeLessThanOrEqual(DAYS_30);
  }, 180_000);
});
