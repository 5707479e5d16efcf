import { Router } from 'express';

/**
 * A router of a listener's own paths beside the API (probes, key sets, resource metadata). It
 * reads paths as the app does (app.ts): `/HEALTHZ` is not `/healthz`, as `/API` is not `/api`.
 * Express's routers ignore the app's `case sensitive routing`; each must be told.
 */
export function listenerRouter(): Router {
  return Router({ caseSensitive: true });
}
