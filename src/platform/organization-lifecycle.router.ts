import type { Request, Router } from 'express';
import { platformRouter } from './path-ids.ts';
import { success } from '../envelope/envelope.ts';
import type { Audit } from '../http/audit.ts';
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
  const router = platformRouter();
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
