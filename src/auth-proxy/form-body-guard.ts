import type { IncomingMessage } from 'node:http';
import express, { type RequestHandler } from 'express';
import { sendTokenError, type Replacement } from './grant-answer.ts';
import { readsAsUtf8 } from './utf8-body.ts';

/** How a broken form body is refused (the OpenAPI document shows these). */
export const FORM_BODY_REFUSALS = {
  notUtf8: { status: 400, error: 'invalid_request', description: 'Form body is not valid UTF-8.' },
  malformed: { status: 400, error: 'invalid_request', description: 'Malformed form body.' },
  charset: { status: 400, error: 'invalid_request', description: 'Form body must be UTF-8.' },
} as const satisfies Record<string, Replacement>;

/** Token requests are a few hundred bytes; anything near this is not a login. */
export const MAX_FORM_BODY_BYTES = 64 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const BROKEN_PERCENT_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

/**
 * Checks URL-encoded form bodies (the token endpoint's) before Keycloak sees them: Keycloak
 * answers a malformed one with 500, which clients would read as "retry later". A broken body
 * gets 400 `invalid_request` in Keycloak's own error format instead; a good one is passed on
 * as `req.body`, a `ReadForm`: its bytes (inflated, if it came compressed) for the proxy to send, and its fields,
 * parsed once for the guards that read them (bootstrap administrator, password throttle).
 */
interface ReadForm {
  readonly bytes: Buffer;
  readonly fields: URLSearchParams;
  /** The fields as the client sent them, when a step replaced them (`replaceForm`). */
  readonly received?: URLSearchParams;
}

export function guardFormBody(): RequestHandler[] {
  const readForm = express.raw({
    type: 'application/x-www-form-urlencoded',
    limit: MAX_FORM_BODY_BYTES,
  });
  const check: RequestHandler = (req, res, next) => {
    const body: unknown = req.body;
    if (!Buffer.isBuffer(body)) {
      next();
      return;
    }
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      sendTokenError(res, FORM_BODY_REFUSALS.notUtf8);
      return;
    }
    if (BROKEN_PERCENT_ESCAPE.test(text)) {
      sendTokenError(res, FORM_BODY_REFUSALS.malformed);
      return;
    }
    if (!readsAsUtf8(req.rawHeaders, text)) {
      sendTokenError(res, FORM_BODY_REFUSALS.charset);
      return;
    }
    req.body = { bytes: body, fields: new URLSearchParams(text) } satisfies ReadForm;
    next();
  };
  return [readForm, check];
}

/** The form `guardFormBody` read and checked, if any. */
function readFormOf(req: IncomingMessage): ReadForm | undefined {
  const body = (req as IncomingMessage & { body?: unknown }).body;
  return body !== null && typeof body === 'object' && 'fields' in body
    ? (body as ReadForm)
    : undefined;
}

/**
 * The bytes of the body a step read before the proxy (the form `guardFormBody` read, or the
 * JSON end-access.ts read), if any, so the proxy can write them to Keycloak.
 */
export function bufferedBodyOf(req: IncomingMessage): Buffer | undefined {
  const body = (req as IncomingMessage & { body?: unknown }).body;
  const bytes: unknown =
    body !== null && typeof body === 'object' && 'bytes' in body ? body.bytes : undefined;
  return Buffer.isBuffer(bytes) ? bytes : undefined;
}

/** Replaces the form `guardFormBody` read: what the proxy sends on is `fields`, encoded. */
export function replaceForm(req: IncomingMessage, fields: URLSearchParams): void {
  const read = readFormOf(req);
  (req as IncomingMessage & { body?: unknown }).body = {
    bytes: Buffer.from(fields.toString()),
    fields,
    received: read?.received ?? read?.fields,
  } satisfies ReadForm;
}

/** The fields of the form `guardFormBody` read, if any. */
export function formFieldsOf(req: IncomingMessage): URLSearchParams | undefined {
  return readFormOf(req)?.fields;
}

/**
 * The fields of the form `guardFormBody` read as the client sent them (before any step replaced
 * them), if any: what the audit log records of a grant once it is answered.
 */
export function receivedFormFieldsOf(req: IncomingMessage): URLSearchParams | undefined {
  const read = readFormOf(req);
  return read?.received ?? read?.fields;
}
