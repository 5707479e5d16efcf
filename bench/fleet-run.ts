import { randomBytes } from 'node:crypto';
import { startKeycloakFront, type KeycloakFront } from '../test/helpers/keycloak-front.ts';
import type { Provisioner } from './fixtures.ts';
import { runFleetDriver } from './fleet-driver.ts';
import { hostAddress, planFleet, type FleetOptions } from './fleet-plan.ts';
import { formatFleet, summarizeFleet } from './fleet-report.ts';
import { origin, PORTS } from './settings.ts';
import { startGateway, type StackInfo } from './stack.ts';

const ORGANIZATION = 'bench-fleet';
/** The stale accounts' own organization, so that the front tells their grants apart. */
const STALE_ORGANIZATION = 'bench-stale';

/**
 * The gateway of the fleet scenario: the bench's settings and nothing else, so the login
 * throttle has its defaults (not the test suite's relaxed ones), Redis included; its Keycloak
 * is reached through a TCP front that records every request, to count the password grants.
 */
export async function startFleetGateway(stack: StackInfo) {
  const front = await startKeycloakFront(stack.keycloakUrl);
  const gateway = await startGateway({ ...stack, keycloakUrl: front.url }, PORTS.gateway);
  return { front, gateway };
}

/**
 * Provisions the fleet's accounts, runs the fleet (fleet-driver.ts) and summarizes it. Each
 * right account logs in once directly at Keycloak first: that checks it, and the fleet does
 * not meet a Keycloak that has not yet hashed a password since it started.
 */
export async function measureFleet(input: {
  provisioner: Provisioner;
  front: KeycloakFront;
  options: FleetOptions;
  log: (text: string) => void;
}) {
  const { provisioner: p, options, log } = input;
  await p.organization(ORGANIZATION);
  await p.organization(STALE_ORGANIZATION);
  const accounts = [];
  for (let i = 1; i <= options.accounts; i++) {
    accounts.push(await p.user(ORGANIZATION, `fleet-user-${i}`));
  }
  const staleAccounts = [];
  for (let i = 1; i <= options.staleHosts; i++) {
    const user = await p.user(STALE_ORGANIZATION, `stale-user-${i}`);
    // The password the job still holds: the account's was changed since.
    staleAccounts.push({ ...user, password: randomBytes(12).toString('base64url') });
  }
  await Promise.all(accounts.map((account) => p.passwordGrant(account)));

  const jobs = planFleet(options);
  const hosts = Array.from({ length: options.hosts }, (_, i) => hostAddress(i));
  log(
    `fleet: ${jobs.length} jobs in ${options.waves} waves ${options.waveGapSeconds} s apart, ` +
      `hosts ${hosts[0]}..${hosts.at(-1)}, at most ${options.deadlineSeconds} s`,
  );
  input.front.seen.length = 0;
  const outcomes = await runFleetDriver({
    gateway: origin(PORTS.gateway),
    organization: ORGANIZATION,
    staleOrganization: STALE_ORGANIZATION,
    options,
    jobs,
    accounts,
    staleAccounts,
  });
  const grantsOf = (realm: string) =>
    input.front.seen.filter(
      (r) =>
        r.method === 'POST' && r.target.endsWith(`/realms/${realm}/protocol/openid-connect/token`),
    ).length;
  const summary = summarizeFleet(outcomes, {
    right: grantsOf(ORGANIZATION),
    stale: grantsOf(STALE_ORGANIZATION),
  });
  const staleHosts = hosts.slice(0, options.staleHosts);
  return {
    options,
    summary,
    markdown: formatFleet(summary, hosts, staleHosts, options.waves),
    outcomes,
  };
}
