import type { Request, Router } from 'express';
import { platformRouter } from './path-ids.ts';
import { z } from 'zod';
import { principalOf } from '../edge/request-scope.ts';
import { success } from '../envelope/envelope.ts';
import { AppError } from '../envelope/errors.ts';
import { tokenLifetimesPatchSchema } from '../keycloak/token-lifetimes.ts';
import {
  masterUserBody,
  operationBody,
  organizationBody,
  organizationUserBody,
  workspaceBody,
} from './provisioning.schemas.ts';
import type { ProvisioningService } from './provisioning.service.ts';
import { bodyField, type Audit } from '../http/audit.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

/**
 * The administrators' provisioning API, mounted under `/api/platform` behind authentication
 * of a master-realm user. Bodies are JSON already parsed upstream; each is checked here for
 * its shape and by the service for its meaning.
 */
export function createProvisioningRouter(service: ProvisioningService, audit: Audit): Router {
  const router = platformRouter();

  // Every change is audited (http/audit.ts); targets name things, never a password or secret.
  const org = (req: Request) => ({ organization: String(req.params.org) });

  router.post(
    '/organizations',
    audit.route(
      'organization.create',
      (req) => bodyField(req, 'id'),
      async (req, res) => {
        const body = parseBody(organizationBody, req.body);
        res.json(success(await service.createOrganization(body)));
      },
    ),
  );

  router.post(
    '/organizations/:org/workspaces',
    audit.route(
      'workspace.create',
      (req) => ({ ...org(req), ...bodyField(req, 'id') }),
      async (req, res) => {
        const body = parseBody(workspaceBody, req.body);
        res.json(
          success(await service.createWorkspace(String(req.params.org), body, actorOf(req))),
        );
      },
    ),
  );

  router.post(
    '/users',
    audit.route(
      'user.create',
      (req) => ({ realm: MASTER_REALM, ...bodyField(req, 'username') }),
      async (req, res) => {
        const { otp_secret, ...body } = parseBody(masterUserBody, req.body);
        res.json(
          success(await service.createUser(MASTER_REALM, { ...body, otpSecret: otp_secret })),
        );
      },
    ),
  );

  router.post(
    '/organizations/:org/users',
    audit.route(
      'user.create',
      (req) => ({ realm: String(req.params.org), ...bodyField(req, 'username') }),
      async (req, res) => {
        const { otp_secret, ...body } = parseBody(organizationUserBody, req.body);
        const user = await service.createUser(String(req.params.org), {
          ...body,
          otpSecret: otp_secret,
        });
        res.json(success(user));
      },
    ),
  );

  router.post(
    '/organizations/:org/workspaces/:ws/operations',
    audit.route(
      'operation.create',
      (req) => ({ ...org(req), workspace: String(req.params.ws) }),
      async (req, res) => {
        const body = parseBody(operationBody, req.body);
        const [organizationId, ws] = [String(req.params.org), String(req.params.ws)];
        res.json(success(await service.addOperation(organizationId, ws, body, actorOf(req))));
      },
    ),
  );

  router.get('/token-lifetimes', async (_req, res) => {
    res.json(success(await service.getTokenLifetimes(MASTER_REALM)));
  });

  router.patch(
    '/token-lifetimes',
    audit.route(
      'token_lifetimes.change',
      (req) => ({ realm: MASTER_REALM, fields: fieldsOf(req) }),
      async (req, res) => {
        const patch = parseBody(tokenLifetimesPatchSchema, req.body);
        res.json(success(await service.setTokenLifetimes(MASTER_REALM, patch)));
      },
    ),
  );

  router.get('/organizations/:org/token-lifetimes', async (req, res) => {
    res.json(success(await service.getTokenLifetimes(req.params.org)));
  });

  router.patch(
    '/organizations/:org/token-lifetimes',
    audit.route(
      'token_lifetimes.change',
      (req) => ({ realm: String(req.params.org), fields: fieldsOf(req) }),
      async (req, res) => {
        const patch = parseBody(tokenLifetimesPatchSchema, req.body);
        res.json(success(await service.setTokenLifetimes(String(req.params.org), patch)));
      },
    ),
  );

  router.post(
    '/brute-force-detection',
    audit.route(
      'brute_force_detection.apply',
      () => ({}),
      async (_req, res) => {
        res.json(success(await service.protectRealmsFromBruteForce()));
      },
    ),
  );

  return router;
}

/** Validates a parsed JSON body; the first few problems become the 400 message. */
function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const message = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`)
    .join('; ');
  throw new AppError('badRequestBody', { message, data: null });
}

/** Who to record as creator: the caller the admission in front of this router established. */
function actorOf(req: Request): string {
  return principalOf(req).username;
}

/** The names of the lifetimes a PATCH body sets (its values are not secrets, but lines stay short). */
function fieldsOf(req: Request): string[] {
  const body: unknown = req.body;
  return body && typeof body === 'object' ? Object.keys(body) : [];
}
