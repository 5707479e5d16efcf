import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/http/logger.ts';
import { createTracing, type Tracing } from '../../../src/tracing/tracing.ts';

const RATIO = 0.05;
const REQUESTS = 400;
/** Far above the 20 a share of 5% keeps on average: an honest sampler never gets near it. */
const AT_MOST = 100;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A trace id whose four 32-bit words XOR to 0: chosen, not random. */
function chosenTraceId(): string {
  const words = [0, 1, 2].map(() => randomBytes(4).readUInt32BE());
  words.push((words[0]! ^ words[1]! ^ words[2]!) >>> 0);
  return words.map((w) => w.toString(16).padStart(8, '0')).join('');
}

const request = (traceparent: string) =>
  ({ method: 'GET', url: '/api/x', headers: { traceparent } }) as unknown as IncomingMessage;

/**
 * Sampling keeps `OTEL_TRACES_SAMPLER_ARG` of the requests whatever trace id a client's
 * `traceparent` names: a client that picks its trace ids cannot have every request traced
 * (the exporter, the collector and the gateway's CPU pay for each one).
 */
describe('trace sampling of requests that continue a client trace', () => {
  let tracing: Tracing;
  beforeAll(async () => {
    tracing = await createTracing({
      // Nothing is exported: the spans of these requests never end.
      url: 'http://127.0.0.1:9/v1/traces',
      headers: {},
      serviceName: 'realmgate-test',
      sampleRatio: RATIO,
      logger: createLogger('silent'),
    });
  });
  afterAll(() => tracing?.shutdown());

  const traced = (traceparentOf: () => string) => {
    let count = 0;
    for (let i = 0; i < REQUESTS; i++) {
      const res = new EventEmitter() as unknown as ServerResponse;
      if (tracing.serveRequest(request(traceparentOf()), res, `r${i}`).isRecording()) count++;
    }
    return count;
  };

  it('random trace ids: about the share configured', () => {
    const count = traced(() => `00-${hex(16)}-${hex(8)}-01`);
    expect(count).toBeGreaterThan(0);
    expect(count).toBeLessThan(AT_MOST);
  });

  it('trace ids chosen to look sampled: still about the share configured', () => {
    expect(traced(() => `00-${chosenTraceId()}-${hex(8)}-01`)).toBeLessThan(AT_MOST);
  });

  it('one small trace id for every request: still about the share configured', () => {
    expect(traced(() => `00-${'0'.repeat(31)}1-${hex(8)}-01`)).toBeLessThan(AT_MOST);
  });
});
