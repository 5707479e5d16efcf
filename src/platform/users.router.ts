import type { Request, Response, Router } from 'express';
import { platformRouter } from './path-ids.ts';
import type { z } from 'zod';
import { principalOf } from '../edge/request-scope.ts';
import { success } from '../envelope/envelope.ts';
import { AppError } from '../envelope/errors.ts';
import type { Audit } from '../http/audit.ts';
import { passwordBody, userListQuery } from './users.schemas.ts';
import type { UsersService } from './users.service.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

/** Master users under `/users`, an organization's under `/organizations/:org/users`. */
const REALM_PATHS = ['/users', '/organizations/:org/users'];
const at = (suffix: string) => REALM_PATHS.map((path) => `${path}${suffix}`);

/**
 * The user lifecycle (list, get, disable, enable, delete, password, workspace roles), under
 * `/api/platform` (master-realm callers only; see platform.router.ts). Every
 * change is audited, its target naming the realm and user, never a password.
 */
export function createUsersRouter(service: UsersService, audit: Audit): Router {
  const router = platformRouter();

  const realmOf = (req: Request) =>
    req.params.org === undefined ? MASTER_REALM : String(req.params.org);
  const usernameOf = (req: Request) => String(req.params.username);
  const target = (req: Request) => ({ realm: realmOf(req), username: usernameOf(req) });
  const answer = async (res: Response, work: Promise<unknown>) => {
    res.json(success(await work));
  };

  router.get(REALM_PATHS, async (req, res) => {
    const query = parse(userListQuery, req.query, 'query');
    await answer(res, service.list(realmOf(req), query));
  });

  router.get(at('/:username'), async (req, res) => {
    await answer(res, service.get(realmOf(req), usernameOf(req)));
  });

  for (const [verb, enabled] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    router.post(
      at(`/:username/${verb}`),
      audit.route(`user.${verb}`, target, (req, res) =>
        answer(res, service.setEnabled(realmOf(req), usernameOf(req), enabled, principalOf(req))),
      ),
    );
  }

  router.delete(
    at('/:username'),
    audit.route('user.delete', target, (req, res) =>
      answer(res, service.remove(realmOf(req), usernameOf(req), principalOf(req))),
    ),
  );

  router.put(
    at('/:username/password'),
    audit.route('user.password', target, async (req, res) => {
      const { password } = parse(passwordBody, req.body, 'body');
      await answer(
        res,
        service.setPassword(realmOf(req), usernameOf(req), password, principalOf(req)),
      );
    }),
  );

  const workspacePath = '/organizations/:org/users/:username/workspaces/:ws';
  for (const [method, action, held] of [
    ['put', 'user.grant', true],
    ['delete', 'user.revoke', false],
  ] as const) {
    router[method](
      workspacePath,
      audit.route(
        action,
        (req) => ({ ...target(req), workspace: String(req.params.ws) }),
        (req, res) =>
          answer(
            res,
            service.setWorkspace(
              realmOf(req),
              usernameOf(req),
              String(req.params.ws),
              held,
              principalOf(req),
            ),
          ),
      ),
    );
  }

  return router;
}

/** Validates a query or JSON body; the first few problems become the 400 `400-00002` message. */
function parse<T extends z.ZodType>(schema: T, input: unknown, what: string): z.output<T> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const message = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || what}: ${issue.message}`)
    .join('; ');
  throw new AppError('badRequestBody', { message, data: null });
}
