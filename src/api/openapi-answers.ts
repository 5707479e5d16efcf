import { EXAMPLE_TS, envelope, errorEnvelope } from '../envelope/envelope.schemas.ts';
import { errorCodes, type ErrorCode } from '../envelope/errors.ts';
import type { HttpMethod } from '../http/route-table.ts';
import { jsonSchemaOf, type JsonValue } from './openapi-zod.ts';

export type { HttpMethod };

/** The parts of an OpenAPI operation the tests and the document rely on. */
export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** `[]`: no authentication. There is no top-level `security`: each operation says. */
  security: Record<string, string[]>[];
  parameters?: JsonValue[];
  requestBody?: JsonValue;
  responses: Record<string, JsonValue>;
}

export type OpenApiPaths = Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;

export function json(body: JsonValue): JsonValue {
  return { 'application/json': body };
}

/** A successful answer: the envelope with its `data`. */
export function success(data: JsonValue, description: string): JsonValue {
  const answer = {
    allOf: [jsonSchemaOf(envelope, 'output'), { type: 'object', properties: { data } }],
  };
  return { description, content: json({ schema: answer }) };
}

/** What a 401 carries: the challenge, and with `DPOP_NONCE` on, the nonce a proof must name. */
const CHALLENGE_HEADERS: JsonValue = {
  'WWW-Authenticate': { schema: { type: 'string' } },
  'DPoP-Nonce': {
    description:
      'With `error="use_dpop_nonce"` in the challenge: the nonce the next DPoP proof must carry (RFC 9449 section 9).',
    schema: { type: 'string' },
  },
};

/** Groups error codes by status; each status documents every result code it can carry. */
export function errorResponses(codes: ErrorCode[]): Record<string, JsonValue> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const { status } = errorCodes[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, JsonValue> = {};
  for (const [status, group] of byStatus) {
    const examples = Object.fromEntries(
      group.map((code) => {
        const { result, message } = errorCodes[code];
        return [code, { value: { data: null, message, result, ts: EXAMPLE_TS } }];
      }),
    );
    responses[String(status)] = {
      description: group
        .map((code) => `${errorCodes[code].result} ${errorCodes[code].message}`)
        .join(' / '),
      ...(status === 401 && { headers: CHALLENGE_HEADERS }),
      ...((status === 503 || status === 429) && {
        headers: { 'Retry-After': { schema: { type: 'integer' } } },
      }),
      content: json({ schema: jsonSchemaOf(errorEnvelope, 'output'), examples }),
    };
  }
  return responses;
}
