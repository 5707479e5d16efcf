import { Router, type Request } from 'express';
import { success } from '../envelope/envelope.ts';
import { AppError } from '../envelope/errors.ts';
import type { Audit } from '../http/audit.ts';
import { isOrganizationId, isWorkspaceId } from '../keycloak/identifiers.ts';
import type { OrganizationLifecycle } from './organization-lifecycle.service.ts';

/**
 * The administrators' read, suspend and delete calls for organizations and workspaces, mounted
 * under `/api/platform` beside the provisioning router (same admission: a master-realm user).
 * `GET /organizations` (the list) is the listing router's.
 */
export function createOrganizationLifecycleRouter(
  lifecycle: OrganizationLifecycle,
  audit: Audit,
): Router {
  const router = Router();
  // A path id outside its alphabet names nothing: 404 before any database or Keycloak call.
  router.param('org', (_req, _res, next, id: string) => {
    next(isOrganizationId(id) ? undefined : new AppError('organizationNotFound'));
  });
  router.param('ws', (_req, _res, next, id: string) => {
    next(isWorkspaceId(id) ? undefined : new AppError('workspaceNotFound'));
  });
  const org = (req: Request) => String(req.params.org);
  const ws = (req: Request) => String(req.params.ws);

  router.get('/organizations/:org', async (req, res) => {
    res.json(success(await lifecycle.getOrganization(org(req))));
  });

  router.delete(
    '/organizations/:org',
    audit.route(
      'organization.delete',
      (req) => ({ organization: org(req) }),
      async (req, res) => {
        res.json(success(await lifecycle.deleteOrganization(org(req), req.query.confirm)));
      },
    ),
  );

  for (const [verb, enabled] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    router.post(
      `/organizations/:org/${verb}`,
      audit.route(
        `organization.${verb}`,
        (req) => ({ organization: org(req) }),
        async (req, res) => {
          res.json(success(await lifecycle.setOrganizationEnabled(org(req), enabled)));
        },
      ),
    );
  }

  router.get('/organizations/:org/workspaces', async (req, res) => {
    res.json(success(await lifecycle.listWorkspaces(org(req))));
  });

  router.delete(
    '/organizations/:org/workspaces/:ws',
    audit.route(
      'workspace.delete',
      (req) => ({ organization: org(req), workspace: ws(req) }),
      async (req, res) => {
        res.json(success(await lifecycle.deleteWorkspace(org(req), ws(req))));
      },
    ),
  );

  return router;
}
