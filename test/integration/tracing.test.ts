import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { VERSION } from '../../src/release/version.ts';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import {
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../helpers/otlp-receiver.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

const SERVER = 2;
const CLIENT = 3;
const INTERNAL = 1;
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** A W3C traceparent: version 00, trace id, parent span id, sampled. */
const traceparentOf = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`;
const spanIdIn = (traceparent: unknown) => String(traceparent).split('-')[2];

/**
 * OpenTelemetry tracing on: spans of the request, its admission, its Keycloak calls and the
 * forward reach a local OTLP/HTTP endpoint, and `traceparent` goes on to the upstream and to
 * Keycloak naming the span that called them. Off (the default), the client's traceparent
 * passes through untouched and nothing is exported.
 */
describe('tracing (OpenTelemetry, OTLP over HTTP)', () => {
  let receiver: OtlpReceiver;
  let upstream: RecordingUpstream;
  let front: KeycloakFront;
  let traced: Replica;
  let untraced: Replica;
  let org: string;
  let tracedClosed = false;
  const automation = () => `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
  /**
   * A request to the test realm's token endpoint: the replicas' own admin sessions (realm
   * master) go through the same front, at any time.
   */
  const toOrgToken = (r: { target: string }) =>
    r.target.endsWith(`/realms/${org}/protocol/openid-connect/token`);

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startRecordingUpstream();
    front = await startKeycloakFront(testEnv().keycloakUrl);
    const common = {
      KEYCLOAK_URL: front.url,
      AUTOMATION_UPSTREAM_URL: upstream.url,
      REVOCATION_CHECK_SECONDS: 'off',
    };
    traced = await startReplica(19210, {
      ...common,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: 'realmgate-traced',
    });
    untraced = await startReplica(19220, common);
    org = await createOrganization(['ws1']);
  });
  afterAll(async () => {
    if (!tracedClosed) await traced?.gateway.close();
    await untraced?.gateway.close();
    await front?.close();
    await upstream?.close();
    await receiver?.close();
    await closeTestDb();
  });

  /** The spans of `traceId` once those named `names` have all arrived (exports are batched). */
  async function spansOf(traceId: string, names: string[]): Promise<ReceivedSpan[]> {
    return vi.waitFor(
      () => {
        const spans = receiver.spans.filter((s) => s.traceId === traceId);
        for (const name of names) expect(spans.map((s) => s.name)).toContain(name);
        return spans;
      },
      { ...EVENTUALLY, interval: 100 },
    );
  }
  const one = (spans: ReceivedSpan[], name: string) => {
    const found = spans.filter((s) => s.name === name);
    expect(found, name).toHaveLength(1);
    return found[0]!;
  };

  it('forwarded route: request, admission, password grant and forward, in the client trace', async () => {
    const user: TestUser = await createUser(org, { workspaceRoles: ['ws1'] });
    const [traceId, clientSpan] = [hex(16), hex(8)];
    upstream.seen.length = 0;
    front.seen.length = 0;
    const res = await fetch(`${traced.url}${automation()}`, {
      headers: { authorization: basicAuth(user), traceparent: traceparentOf(traceId, clientSpan) },
    });
    expect(res.status).toBe(200);

    const spans = await spansOf(traceId, ['GET', 'admission', 'keycloak grant', 'forward']);
    const request = one(spans, 'GET');
    const admission = one(spans, 'admission');
    const grant = one(spans, 'keycloak grant');
    const forward = one(spans, 'forward');
    expect(request).toMatchObject({
      kind: SERVER,
      parentSpanId: clientSpan,
      service: 'realmgate-traced',
    });
    expect(request.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'url.path': automation(),
      'realmgate.request_id': res.headers.get('x-request-id'),
    });
    expect(admission).toMatchObject({ kind: INTERNAL, parentSpanId: request.spanId });
    expect(grant).toMatchObject({ kind: CLIENT, parentSpanId: admission.spanId });
    expect(forward).toMatchObject({ kind: CLIENT, parentSpanId: request.spanId });
    expect(forward.attributes['http.response.status_code']).toBe(200);
    // Every Keycloak call of the request is a child of its admission.
    for (const call of spans.filter((s) => s.name.startsWith('keycloak '))) {
      expect(call.parentSpanId, call.name).toBe(admission.spanId);
    }

    // The upstream and Keycloak were told which span called them.
    const sent = upstream.seen.map((r) => r.headers.traceparent);
    expect(sent).toEqual([traceparentOf(traceId, forward.spanId)]);
    const atKeycloak = front.seen.find(toOrgToken);
    expect(atKeycloak?.headers.traceparent).toBe(traceparentOf(traceId, grant.spanId));
  });

  it('a cached login: admission and forward only, no Keycloak call', async () => {
    const user: TestUser = await createUser(org, { workspaceRoles: ['ws1'] });
    const first = await fetch(`${traced.url}${automation()}`, {
      headers: { authorization: basicAuth(user) },
    });
    expect(first.status).toBe(200);
    const traceId = hex(16);
    const res = await fetch(`${traced.url}${automation()}`, {
      headers: { authorization: basicAuth(user), traceparent: traceparentOf(traceId, hex(8)) },
    });
    expect(res.status).toBe(200);
    const spans = await spansOf(traceId, ['GET', 'admission', 'forward']);
    expect(spans.map((s) => s.name).sort()).toEqual(['GET', 'admission', 'forward']);
    expect(one(spans, 'admission').attributes['realmgate.known']).toBe(true);
  });

  it('/auth: Keycloak gets a traceparent naming the request span', async () => {
    const user = await createUser(org);
    const traceId = hex(16);
    front.seen.length = 0;
    const res = await fetch(`${traced.url}/auth/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        traceparent: traceparentOf(traceId, hex(8)),
        tracestate: 'vendor=client-state',
      },
      body: passwordGrantBody(user),
    });
    expect(res.status).toBe(200);
    const request = one(await spansOf(traceId, ['POST']), 'POST');
    const sent = front.seen.find(toOrgToken);
    expect(spanIdIn(sent?.headers.traceparent)).toBe(request.spanId);
    expect(sent?.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-`));
    expect(sent?.headers.tracestate).toBe('vendor=client-state');
  });

  it('a request whose client leaves before its answer is still a server span, an error', async () => {
    const user = await createUser(org);
    const traceId = hex(16);
    front.seen.length = 0;
    // Keycloak's answer to the grant is held: the client gives up before it comes.
    front.hold(new RegExp(`/realms/${org}/protocol/openid-connect/token$`), 30_000);
    const gone = new AbortController();
    const answer = fetch(`${traced.url}/auth/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      signal: gone.signal,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        traceparent: traceparentOf(traceId, hex(8)),
      },
      body: passwordGrantBody(user),
    });
    try {
      await vi.waitFor(() => expect(front.seen.some(toOrgToken)).toBe(true), {
        ...EVENTUALLY,
        interval: 20,
      });
      gone.abort();
      await expect(answer).rejects.toThrow();
      const request = one(await spansOf(traceId, ['POST']), 'POST');
      expect(request).toMatchObject({ kind: SERVER, status: 2 });
      expect(request.attributes['url.path']).toBe(
        `/auth/realms/${org}/protocol/openid-connect/token`,
      );
    } finally {
      front.hold(/$^/, 0);
    }
  });

  it('a malformed traceparent starts a new trace instead, and is not passed on', async () => {
    const user: TestUser = await createUser(org, { workspaceRoles: ['ws1'] });
    upstream.seen.length = 0;
    const res = await fetch(`${traced.url}${automation()}`, {
      headers: { authorization: basicAuth(user), traceparent: '00-not-a-trace-01' },
    });
    expect(res.status).toBe(200);
    const sent = String(upstream.seen[0]?.headers.traceparent);
    expect(sent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const spans = await spansOf(sent.split('-')[1]!, ['GET', 'forward']);
    expect(one(spans, 'GET').parentSpanId).toBe('');
    expect(spanIdIn(sent)).toBe(one(spans, 'forward').spanId);
  });

  it('off by default: the client traceparent passes through and nothing is exported', async () => {
    const user: TestUser = await createUser(org, { workspaceRoles: ['ws1'] });
    const traceId = hex(16);
    const traceparent = traceparentOf(traceId, hex(8));
    upstream.seen.length = 0;
    const res = await fetch(`${untraced.url}${automation()}`, {
      headers: { authorization: basicAuth(user), traceparent },
    });
    expect(res.status).toBe(200);
    expect(upstream.seen.map((r) => r.headers.traceparent)).toEqual([traceparent]);
    // The traced replica's exports go on; none of them is this request's.
    tracedClosed = true;
    await traced.gateway.close();
    expect(receiver.spans.filter((s) => s.traceId === traceId)).toEqual([]);
    expect(new Set(receiver.spans.map((s) => s.service))).toEqual(new Set(['realmgate-traced']));
    expect(new Set(receiver.spans.map((s) => s.serviceVersion))).toEqual(new Set([VERSION]));
  });
});
