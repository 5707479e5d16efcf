import type { JobOutcome } from './fleet-plan.ts';
import { percentile } from './stats.ts';

/** What the fleet reports (README.md); `grants`: token POSTs Keycloak's front saw, per organization. */
export interface FleetGrants {
  right: number;
  stale: number;
}
export type FleetSummary = ReturnType<typeof summarizeFleet>;

const ok = (status: number) => status >= 200 && status < 300;

function countBy<T>(items: T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}

function times(answers: { status: number; ms: number }[]) {
  const sorted = answers.filter((a) => ok(a.status)).map((a) => a.ms);
  sorted.sort((a, b) => a - b);
  return { served: sorted.length, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
}

export function summarizeFleet(outcomes: JobOutcome[], grants: FleetGrants) {
  const right = outcomes.filter((o) => !o.job.account.stale);
  const stale = outcomes.filter((o) => o.job.account.stale);
  const logins = right.flatMap((o) => o.logins.map((answer) => ({ ...answer, job: o.job })));
  const refused = logins.filter((l) => !ok(l.status));
  const staleTries = stale.flatMap((o) => o.logins);
  const api = right.flatMap((o) => o.api);
  const apiFailed = api.filter((a) => !ok(a.status));
  const label = (a: { status: number; error?: string }) =>
    a.status === 0 ? 'no answer' : `${a.status}${a.error ? ` ${a.error}` : ''}`;
  return {
    jobs: { right: right.length, stale: stale.length },
    rightLogins: {
      total: logins.length,
      /** Right jobs the deadline stopped before they could log in. */
      notTried: right.filter((o) => o.logins.length === 0).length,
      refused: refused.length,
      /** Refused by the login throttle; the others failed (Keycloak too slow, no answer...). */
      throttled: refused.filter((l) => l.status === 429).length,
      refusedBy: countBy(refused, label),
      /** `host wave` → refused right logins, e.g. `127.0.0.20 1`. */
      refusedByHostAndWave: countBy(refused, (l) => `${l.job.host} ${l.job.wave + 1}`),
      retryAfter: [...new Set(refused.flatMap((l) => (l.retryAfter ? [l.retryAfter] : [])))],
      ...times(logins),
    },
    staleAttempts: { total: staleTries.length, answeredBy: countBy(staleTries, label) },
    api: {
      total: api.length,
      failed: apiFailed.length,
      failedBy: countBy(apiFailed, label),
      ...times(api),
    },
    keycloakGrants: {
      ...grants,
      perRightJob: right.length ? grants.right / right.length : 0,
      perStaleJob: stale.length ? grants.stale / stale.length : 0,
    },
  };
}

const list = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([what, n]) => `${what}: ${n}`)
    .join(', ') || 'none';

/** The summary as Markdown ready to paste: the figures, then refusals by host and wave. */
export function formatFleet(s: FleetSummary, hosts: string[], staleHosts: string[], waves: number) {
  const ms = (v: number) => v.toFixed(1);
  const { rightLogins: r, api, keycloakGrants: g } = s;
  const figures = [
    '| fleet | measured |',
    '|---|---|',
    `| jobs | ${s.jobs.right} right, ${s.jobs.stale} stale |`,
    `| right logins refused (target 0) | ${r.refused} of ${r.total}${r.notTried ? `; ${r.notTried} jobs stopped before their login` : ''} |`,
    `| of which by the login throttle (429) | ${r.throttled} |`,
    `| answers to the right logins refused | ${list(r.refusedBy)} |`,
    `| Retry-After of those refused | ${r.retryAfter.join(', ') || 'none'} |`,
    `| stale logins tried | ${s.staleAttempts.total} (${list(s.staleAttempts.answeredBy)}) |`,
    `| Keycloak password grants, right accounts | ${g.right} (${g.perRightJob.toFixed(2)} per right job) |`,
    `| Keycloak password grants, stale accounts | ${g.stale} (${g.perStaleJob.toFixed(2)} per stale job) |`,
    `| right logins served: p50 / p99 ms | ${ms(r.p50Ms)} / ${ms(r.p99Ms)} (${r.served}) |`,
    `| API calls not 2xx | ${api.failed} of ${api.total} (${list(api.failedBy)}) |`,
    `| API calls served: p50 / p99 ms | ${ms(api.p50Ms)} / ${ms(api.p99Ms)} (${api.served}) |`,
  ];
  const waveNumbers = Array.from({ length: waves }, (_, i) => i + 1);
  const byHost = [
    `| right logins refused | ${waveNumbers.map((w) => `wave ${w}`).join(' | ')} |`,
    `|---|${waveNumbers.map(() => '---:').join('|')}|`,
    ...hosts.map((host) => {
      const cells = waveNumbers.map((w) => r.refusedByHostAndWave[`${host} ${w}`] ?? 0);
      const name = staleHosts.includes(host) ? `${host} (a stale job)` : host;
      return `| ${name} | ${cells.join(' | ')} |`;
    }),
  ];
  return [...figures, '', ...byHost].join('\n');
}
