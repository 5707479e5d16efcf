import { Router, type RequestHandler } from 'express';

/**
 * A router of a listener's own paths beside the API (probes, key sets, resource metadata). It
 * reads paths as the app does (app.ts): `/HEALTHZ` is not `/healthz`, as `/API` is not `/api`.
 * Express's routers ignore the app's `case sensitive routing`; each must be told. `strict`: a
 * trailing slash names another path; without it one changes nothing, as on the API.
 */
export function listenerRouter(options: { strict?: boolean } = {}): Router {
  return Router({ caseSensitive: true, strict: options.strict ?? false });
}

/**
 * `router` without express's own answer to OPTIONS on its paths (200 and the methods as
 * `text/plain`, outside the envelope): OPTIONS goes on to the app's 404, as any method such a
 * path does not serve, and as on the API. Other OPTIONS pass by (under `/auth`, Keycloak's).
 */
export function withoutOptionsAnswer(router: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (req.method === 'OPTIONS') next();
    else void router(req, res, next);
  };
}
