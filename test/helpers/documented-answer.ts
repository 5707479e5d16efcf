import { expect } from 'vitest';
import { API_ROUTES } from '../../src/api/api-routes.ts';
import { openApiDocument, type OpenApiOperation } from '../../src/api/openapi.ts';
import { envelope } from '../../src/envelope/envelope.schemas.ts';

/** The operation `operationId` as the served document (`GET /api/openapi.json`) has it. */
function documentedOperation(operationId: string): OpenApiOperation {
  for (const item of Object.values(openApiDocument.paths)) {
    for (const operation of Object.values(item)) {
      if (operation?.operationId === operationId) return operation;
    }
  }
  throw new Error(`the document has no operation ${operationId}`);
}

/**
 * Checks a real answer against what the API description says of the route `operationId`: the
 * success envelope, and `data` as the route's own schema reads it (the schema the document is
 * generated from). Its objects are strict: a field the document does not name, or one it
 * requires and the answer lacks, fails here.
 */
export function expectDocumentedAnswer(operationId: string, body: unknown): void {
  const route = API_ROUTES.find((declared) => declared.operationId === operationId);
  if (!route) throw new Error(`no route has the operationId ${operationId}`);
  expect(envelope.safeParse(body).error?.issues ?? []).toEqual([]);
  const data = (body as { data?: unknown }).data;
  expect(route.data.safeParse(data).error?.issues ?? [], operationId).toEqual([]);
}

/**
 * Checks a real failure against the API description of the operation `operationId`, as the
 * document says it: a response for its status, whose examples carry its result code (or, for
 * an answer in OAuth's shape, its `error`), and the headers that status documents
 * (`Retry-After`, `WWW-Authenticate`, `DPoP-Nonce`) when the answer has them.
 */
export function expectDocumentedFailure(
  operationId: string,
  answer: { status: number; body: unknown; headers?: Headers },
): void {
  const { responses } = documentedOperation(operationId);
  const { result, error } = answer.body as { result?: unknown; error?: unknown };
  const response = responses[String(answer.status)] as
    | {
        content?: Record<
          string,
          { examples?: Record<string, { value: { result?: string; error?: string } }> }
        >;
        headers?: Record<string, unknown>;
      }
    | undefined;
  const examples = Object.values(response?.content?.['application/json']?.examples ?? {});
  const codeOf = (value: { result?: unknown; error?: unknown }) =>
    String(value.result ?? value.error);
  const documented = examples.map((example) => `${answer.status} ${codeOf(example.value)}`);
  expect(documented, operationId).toContain(`${answer.status} ${codeOf({ result, error })}`);
  for (const name of ['retry-after', 'www-authenticate', 'dpop-nonce']) {
    if (!answer.headers?.has(name)) continue;
    const headers = Object.keys(response?.headers ?? {}).map((header) => header.toLowerCase());
    expect(headers, `${operationId} ${answer.status}: ${name}`).toContain(name);
  }
}
