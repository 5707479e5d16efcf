import express, { Router, type ErrorRequestHandler, type RequestHandler } from 'express';
import { admitApiRequests, type Admission } from '../auth/admission.ts';
import { scopeOf } from '../edge/request-scope.ts';
import type { RouteDeclaration } from '../edge/route.ts';
import type { Audit } from '../http/audit.ts';
import { readsBody, serveTable, type AnyRoute } from '../http/route-table.ts';
import { API_TABLES, OPENAPI_ROUTE, type ApiServices } from './api-routes.ts';
import { openApiDocument } from './openapi.ts';

/**
 * The service of every table; the built-in operation list's only when the automation route is
 * not forwarded (automation/automation.area.ts): forwarded, the edge serves it.
 */
export type ApiServiceSet = Omit<ApiServices, 'operations'> &
  Partial<Pick<ApiServices, 'operations'>>;

export interface ApiDeps {
  admission: Admission;
  audit: Audit;
  services: ApiServiceSet;
  /** The tables to serve: `API_TABLES`, the edge's reader compiled from the same. */
  tables?: typeof API_TABLES;
}

/** JSON bodies of API calls are small; this bounds what a client can make us parse. */
const MAX_JSON_BODY = '64kb';

/**
 * The credentials of a route that takes them from a form (`formCredentials`) when no header
 * carries them: the field becomes the Authorization header, so the admission reads it as any
 * other, once. Only the field is kept; the rest of the form is not read by the route.
 */
function formCredentials(): RequestHandler {
  const form = express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 10 });
  return (req, res, next) => {
    const { entry } = scopeOf(req).route;
    if (!entry?.formCredentials || req.headers.authorization !== undefined) {
      next();
      return;
    }
    form(req, res, (err?: unknown) => {
      if (err) {
        next(err);
        return;
      }
      const field = (req.body as Record<string, unknown> | undefined)?.authorization;
      if (typeof field === 'string') req.headers.authorization = field;
      req.body = undefined;
      next();
    });
  };
}

/**
 * Everything under `/api` that is not forwarded: the admission (realm, credentials, workspace
 * role; see auth/admission.ts), then the handler of the table entry the edge matched
 * (edge/route.ts): nothing here reads the path again. A path no entry serves is 404 once the
 * caller is admitted. (A forwarded automation route never gets here: the edge hands it to the
 * forward route, which runs the same admission.)
 */
export function createApiRouter(deps: ApiDeps): Router {
  const json = express.json({ limit: MAX_JSON_BODY });
  const handlers = new Map<RouteDeclaration, RequestHandler>();
  const { tables = API_TABLES } = deps;
  for (const name of Object.keys(tables) as (keyof ApiServices)[]) {
    const service = deps.services[name];
    if (service === undefined) continue;
    const table = serveTable(tables[name] as readonly AnyRoute<typeof service>[], service);
    for (const route of table.routes) {
      const handler = table.handlerOf(route, deps.audit);
      // A body is read (and refused when malformed or too large) where the route reads one.
      handlers.set(
        route,
        readsBody(route)
          ? (req, res, next) =>
              json(req, res, (err?: unknown) => (err ? next(err) : handler(req, res, next)))
          : handler,
      );
    }
  }
  // The API's own description needs no credentials and names no realm.
  handlers.set(OPENAPI_ROUTE, (_req, res) => {
    res.json(openApiDocument);
  });
  const challenged: ErrorRequestHandler = (err, req, _res, next) => {
    next(deps.admission.challenged(err, scopeOf(req).route.realm));
  };
  return (
    Router()
      .use(formCredentials(), admitApiRequests(deps.admission), (req, res, next) => {
        const { entry, realm } = scopeOf(req).route;
        const handler = entry && handlers.get(entry);
        if (handler) handler(req, res, next);
        // No entry: 404, after the body of an admitted request is read as on every route.
        else if (realm !== undefined) json(req, res, next);
        else next();
      })
      // A 401 from any step or handler (the gateway's service token, refused deep in a
      // service) carries the challenge every `/api` 401 does.
      .use(challenged)
  );
}
