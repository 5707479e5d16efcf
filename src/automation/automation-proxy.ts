import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { RequestHandler, Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Logger } from 'pino';
import { principalOf } from '../auth/principal.ts';
import { workspaceRolesOf } from '../auth/authorize.ts';
import { failure } from '../envelope/envelope.ts';
import { errorCodes } from '../envelope/errors.ts';

/** Identity headers the upstream trusts; a client's own copies are always removed. */
const IDENTITY_HEADERS = ['user-id', 'roles', 'org-roles', 'language', 'organization_id'];

const base64Lines = (lines: string[]) => Buffer.from(lines.join('\n'), 'utf8').toString('base64');

/**
 * Forwards `/api/<org>/workspaces/<ws>/ita/...` to the automation service. The client's
 * `Authorization` never leaves the gateway; the upstream gets who the caller is instead:
 * `User-Id`, `Roles` (workspace roles) and `Org-Roles` (realm roles) as base64 of
 * newline-joined lists, `Language` and `organization_id`.
 */
export function createAutomationProxy(options: {
  upstreamUrl: string;
  timeoutMs: number;
  logger: Logger;
}): RequestHandler {
  const keepAlive = { keepAlive: true, maxSockets: 1024 };
  return createProxyMiddleware<IncomingMessage, ServerResponse>({
    target: options.upstreamUrl,
    proxyTimeout: options.timeoutMs,
    agent: options.upstreamUrl.startsWith('https:')
      ? new HttpsAgent(keepAlive)
      : new Agent(keepAlive),
    // Keep the full original path: the upstream serves the same /api/... paths.
    pathRewrite: (_path, req) => (req as IncomingMessage & { originalUrl: string }).originalUrl,
    on: {
      proxyReq(proxyReq, _req, res) {
        const principal = principalOf(res as unknown as Response);
        proxyReq.removeHeader('authorization');
        proxyReq.removeHeader('cookie');
        for (const name of IDENTITY_HEADERS) proxyReq.removeHeader(name);
        proxyReq.setHeader('user-id', principal.userId);
        proxyReq.setHeader('roles', base64Lines(workspaceRolesOf(principal)));
        proxyReq.setHeader('org-roles', base64Lines(principal.realmRoles));
        proxyReq.setHeader('language', principal.locale ?? 'ja');
        proxyReq.setHeader('organization_id', principal.realm);
      },
      error(err, _req, res) {
        options.logger.warn({ err }, 'automation upstream error');
        if (!('setHeader' in res) || res.headersSent) {
          res.destroy();
          return;
        }
        const code =
          (err as NodeJS.ErrnoException).code === 'ECONNREFUSED'
            ? 'upstreamUnavailable'
            : 'upstreamBadGateway';
        const { status, result, message } = errorCodes[code];
        res.statusCode = status;
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(failure(result, message)));
      },
    },
  });
}
