/** The fleet as it runs (issue 28; README.md, "The fleet scenario"); tests plan smaller ones. */
export const FLEET_DEFAULTS = {
  /** Source addresses 127.0.0.20, .21, ...: the gateway sees each as another client. */
  hosts: 4,
  /** Accounts with the right password, every one used on every host. */
  accounts: 4,
  /** Jobs per host and account in a wave, started together; every 4th logs in over Basic. */
  jobs: 8,
  waves: 3,
  /** Seconds from one wave's start to the next's (a wave does not wait for the one before). */
  waveGapSeconds: 10,
  /** Hosts with a stale job (an account of its own, an old password) in every wave. */
  staleHosts: 2,
  /** Logins a stale job tries in a wave, one after the other. */
  staleAttempts: 50,
  /** Rounds of API calls of a right job after its login: the forwarded route, the list. */
  apiRounds: 2,
  /** The whole fleet stops here, whatever is still running (its requests count as failed). */
  deadlineSeconds: 150,
};
export type FleetOptions = typeof FLEET_DEFAULTS;

export type LoginKind = 'grant' | 'basic';

export interface FleetJob {
  wave: number;
  /** The source address the job's connection is bound to. */
  host: string;
  kind: LoginKind;
  /** Which account: `right` ones (index into the right accounts) or the host's `stale` one. */
  account: { stale: boolean; index: number };
}

/** `127.0.0.20` + `index`: loopback addresses that need no setup on Linux. */
export function hostAddress(index: number): string {
  return `127.0.0.${20 + index}`;
}

/** Every job in start order: per wave and host, its right jobs, then its stale job (if any). */
export function planFleet(options: FleetOptions): FleetJob[] {
  const jobs: FleetJob[] = [];
  for (let wave = 0; wave < options.waves; wave++) {
    for (let h = 0; h < options.hosts; h++) {
      const host = hostAddress(h);
      for (let index = 0; index < options.accounts; index++) {
        for (let j = 0; j < options.jobs; j++) {
          const kind = j % 4 === 3 ? 'basic' : 'grant';
          jobs.push({ wave, host, kind, account: { stale: false, index } });
        }
      }
      if (h < options.staleHosts) {
        const kind = h % 2 === 0 ? 'grant' : 'basic';
        jobs.push({ wave, host, kind, account: { stale: true, index: h } });
      }
    }
  }
  return jobs;
}

export interface Answer {
  /** 0: no answer (connection failed, or the fleet's deadline came first). */
  status: number;
  ms: number;
  /** OAuth `error`, or the envelope's `result`, of an answer that is not 2xx. */
  error?: string;
  retryAfter?: string;
}
export interface JobOutcome {
  job: FleetJob;
  logins: Answer[];
  api: (Answer & { call: 'forwarded' | 'list' })[];
}
