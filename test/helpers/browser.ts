import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import puppeteer, { type Browser, type ElementHandle, type Page } from 'puppeteer-core';

/** Debian's chromium (`.ci/run` installs it); CHROMIUM_PATH names another build. */
export function chromiumPath(): string {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  const found = candidates.find((candidate) => candidate && existsSync(candidate));
  if (!found) throw new Error('no chromium found: install Debian package chromium (.ci/run does)');
  return found;
}

/**
 * Headless Chromium with a fresh profile, nothing fetched from outside: background networking,
 * component updates and sync off (this machine's network reaches only package registries).
 * As root, Chromium's sandbox cannot start, so it runs without one.
 */
export function launchChromium(): Promise<Browser> {
  const asRoot = process.getuid?.() === 0;
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      ...(asRoot ? ['--no-sandbox'] : []),
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--window-size=1400,1000',
    ],
    defaultViewport: { width: 1400, height: 1000 },
  });
}

/** Where failing browser tests leave their screenshots (gitignored). */
export const SCREENSHOT_DIR = path.resolve('test-results/browser');

/** Saves a full-page screenshot named after `name`; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const file: `${string}.png` = `${path.join(SCREENSHOT_DIR, name.replace(/[^A-Za-z0-9_-]+/g, '-'))}.png`;
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Signs in on Keycloak's login form, which the console shows first. */
export async function signIn(page: Page, username: string, password: string): Promise<void> {
  await page.waitForSelector('#username');
  await page.type('#username', username);
  await page.type('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('#kc-login')]);
}

/** Replaces a number field's value as a person would: erase it, type; checks the result. */
export async function typeNumber(field: ElementHandle, value: number): Promise<void> {
  await field.click();
  // Chromium's own select-all: a number field has no text selection to set from a script.
  await field.press('a', { commands: ['selectAll'] });
  await field.type(String(value));
  const shown = await field.evaluate((input) => (input as unknown as { value: string }).value);
  if (shown !== String(value)) throw new Error(`field shows ${shown}, not ${value}`);
}

/** Picks a time unit ("Minutes", "Hours", "Days") in a Keycloak time selector. */
export async function chooseUnit(page: Page, group: ElementHandle, unit: string): Promise<void> {
  const toggle = await group.waitForSelector('button[aria-label="Select a time unit"]');
  await toggle!.click();
  const option = await page.waitForSelector(
    `::-p-xpath(//*[@role="option" or contains(@class,"menu__item")][normalize-space(.)="${unit}"])`,
  );
  await option!.click();
}

/**
 * Waits until no request of the page has been waiting for its answer for half a second: the
 * console has its data (a realm, a client) and has filled its form with it. A click or a value
 * typed before that may be undone when the form is filled, and a wait for what it should have
 * shown would never end. False when that did not happen within 15 s (the page goes on as it is).
 */
export async function settled(page: Page): Promise<boolean> {
  return page.waitForNetworkIdle({ idleTime: 500, timeout: 15_000 }).then(
    () => true,
    () => false,
  );
}

/** Keycloak's success and error alerts; those marked as shown before a save, and the others. */
const ALERTS = '.pf-v5-c-alert.pf-m-success, .pf-v5-c-alert.pf-m-danger';
const NEW_ALERTS =
  '.pf-v5-c-alert.pf-m-success:not([data-before-save]), ' +
  '.pf-v5-c-alert.pf-m-danger:not([data-before-save])';
type AlertNode = {
  classList: { contains(name: string): boolean };
  setAttribute(name: string, value: string): void;
  textContent: string | null;
};

/**
 * Clicks a save button (`selector`) and waits for Keycloak's answer to it: a success alert (e.g.
 * "Realm successfully updated"), or an error alert, whose text is then the error (rather than a
 * wait that never ends). Alerts shown before the click (a failed load's) are marked and passed
 * over.
 */
export async function saveAndWait(page: Page, selector: string): Promise<void> {
  const button = await page.waitForSelector(selector);
  await page.$$eval(ALERTS, (nodes) => {
    for (const node of nodes) (node as unknown as AlertNode).setAttribute('data-before-save', '');
  });
  await button!.click();
  const alert = await page.waitForSelector(NEW_ALERTS);
  const failed = await alert!.evaluate((node) =>
    (node as unknown as AlertNode).classList.contains('pf-m-danger')
      ? ((node as unknown as AlertNode).textContent ?? '')
      : undefined,
  );
  if (failed !== undefined) throw new Error(`the console could not save: ${failed}`);
}
