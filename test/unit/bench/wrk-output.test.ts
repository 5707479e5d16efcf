import { describe, expect, it } from 'vitest';
import { parseWrk } from '../../../bench/wrk.ts';

// wrk 4.1.0's report with --latency, as printed by a run against a server answering 401 to
// every tenth request.
const WITH_FAILURES = `Running 1s test @ http://127.0.0.1:29300/
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.26ms    3.65ms  45.19ms   94.71%
    Req/Sec    16.30k     5.89k   23.17k    70.00%
  Latency Distribution
     50%  388.00us
     75%  561.00us
     90%    1.98ms
     99%   19.51ms
  16306 requests in 1.01s, 2.22MB read
  Non-2xx or 3xx responses: 1630
Requests/sec:  16206.31
Transfer/sec:      2.21MB
`;

describe('parseWrk', () => {
  it('counts only good answers per second and reads the percentiles in milliseconds', () => {
    const result = parseWrk(WITH_FAILURES);
    expect(result.ok).toBe(16306 - 1630);
    expect(result.reqPerSec).toBeCloseTo((16306 - 1630) / 1.01, 6);
    expect(result.bad).toBe(1630);
    expect(result.p50Ms).toBeCloseTo(0.388, 9);
    expect(result.p99Ms).toBeCloseTo(19.51, 9);
  });

  it('adds socket errors to the failures and reads durations in minutes', () => {
    const text = WITH_FAILURES.replace('in 1.01s', 'in 1.00m').replace(
      '  Non-2xx or 3xx responses: 1630\n',
      '  Socket errors: connect 0, read 2, write 0, timeout 3\n',
    );
    const result = parseWrk(text);
    expect(result.ok).toBe(16306);
    expect(result.reqPerSec).toBeCloseTo(16306 / 60, 6);
    expect(result.bad).toBe(5);
  });

  it('refuses output without a request count (wrk failed)', () => {
    expect(() => parseWrk('unable to connect to 127.0.0.1:1 Connection refused\n')).toThrow(
      /no request count/,
    );
  });
});
