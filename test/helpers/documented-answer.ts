import { expect } from 'vitest';
import { API_ROUTES } from '../../src/api/api-routes.ts';
import { resultCodesOf } from '../../src/api/openapi-routes.ts';
import { errorCodes } from '../../src/envelope/errors.ts';
import { envelope } from '../../src/envelope/envelope.schemas.ts';

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
 * Checks a real failure against the API description of the route `operationId`: its status and
 * result code are among those the document lists for that operation.
 */
export function expectDocumentedFailure(
  operationId: string,
  answer: { status: number; body: unknown },
): void {
  const route = API_ROUTES.find((declared) => declared.operationId === operationId);
  if (!route) throw new Error(`no route has the operationId ${operationId}`);
  const documented = resultCodesOf(route).map((code) => {
    const { status, result } = errorCodes[code];
    return `${status} ${result}`;
  });
  const { result } = answer.body as { result?: unknown };
  expect(documented, operationId).toContain(`${answer.status} ${String(result)}`);
}
