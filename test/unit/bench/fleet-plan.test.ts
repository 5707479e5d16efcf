import { describe, expect, it } from 'vitest';
import { FLEET_DEFAULTS, hostAddress, planFleet } from '../../../bench/fleet-plan.ts';

describe('planFleet', () => {
  const options = { ...FLEET_DEFAULTS, hosts: 3, accounts: 2, jobs: 4, waves: 2, staleHosts: 2 };
  const jobs = planFleet(options);

  it('runs every account on every host, jobs per account, in every wave, plus the stale jobs', () => {
    const right = jobs.filter((job) => !job.account.stale);
    expect(right).toHaveLength(2 * 3 * 2 * 4);
    for (const wave of [0, 1]) {
      for (const host of ['127.0.0.20', '127.0.0.21', '127.0.0.22']) {
        for (const index of [0, 1]) {
          const mine = right.filter(
            (job) => job.wave === wave && job.host === host && job.account.index === index,
          );
          // Every 4th job logs in over Basic, the others by password grant.
          expect(mine.map((job) => job.kind)).toEqual(['grant', 'grant', 'grant', 'basic']);
        }
      }
    }
  });

  it('gives the first staleHosts hosts one stale job per wave, grant on even hosts, Basic on odd', () => {
    const stale = jobs.filter((job) => job.account.stale);
    expect(stale).toEqual([
      { wave: 0, host: '127.0.0.20', kind: 'grant', account: { stale: true, index: 0 } },
      { wave: 0, host: '127.0.0.21', kind: 'basic', account: { stale: true, index: 1 } },
      { wave: 1, host: '127.0.0.20', kind: 'grant', account: { stale: true, index: 0 } },
      { wave: 1, host: '127.0.0.21', kind: 'basic', account: { stale: true, index: 1 } },
    ]);
  });

  it('has no stale job when staleHosts is 0, and never more than there are hosts', () => {
    expect(planFleet({ ...options, staleHosts: 0 }).some((job) => job.account.stale)).toBe(false);
    const stale = planFleet({ ...options, hosts: 1, staleHosts: 2 }).filter((j) => j.account.stale);
    expect(stale.map((job) => job.host)).toEqual(['127.0.0.20', '127.0.0.20']);
  });

  it('numbers hosts from 127.0.0.20', () => {
    expect([0, 1, 79].map(hostAddress)).toEqual(['127.0.0.20', '127.0.0.21', '127.0.0.99']);
  });
});
