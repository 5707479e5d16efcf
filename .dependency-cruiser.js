// @ts-check
/**
 * The import rules (`npm run lint` runs them): no import cycle between files of src/ or bench/,
 * value or type-only; and the top-level folders of src/ in layers that point one way: a folder
 * imports only the folders below it in LAYERS, and no folder imports the wiring files at the top
 * (src/*.ts).
 */

/** The folders of src/, lowest first: each may import those before it, never those after. */
const LAYERS = [
  'time', // the clock every rule with a lifetime reads: imports nothing of src/
  'release', // the version (package.json's) and the build's facts: imports nothing of src/
  'tracing', // optional OpenTelemetry tracing and the traced scope: imports nothing of src/
  'tenancy', // ids, the master realm, organization state, who a caller is
  'db', // knex, migrations, what a lost database looks like
  'envelope', // the envelope, result codes, the one error handler
  'config', // the environment's schema
  'cache', // one Cache interface, Redis and in-process
  'edge', // every request first: canonical path, its route and scope, request id, the client
  'outbound', // toward an upstream: the header table, X-Forwarded-*, the body rule, forward() and the relay
  'http', // logger, audit, health and readiness
  'keycloak', // the Keycloak client layer: nodes, calls and their failures, token and admin clients
  'auth', // the admission: credentials, revocation, workspace roles
  'auth-proxy', // the /auth route: its guards, the password-attempt throttle, the proxy, console pages
  'automation', // operation list, the forwarded route
  'platform', // /api/platform, the list endpoints, the admin-API operations they run
  'audit', // the audit log: its records, their chain, the writer, the reader's routes
  'metrics', // counts what the layers below report through their own interfaces
  'api', // /api: its router and its OpenAPI document
  'cli', // the realmgate command
  'demo', // demo secrets, data and welcome text
];

/** @type {import('dependency-cruiser').IConfiguration['forbidden']} */
const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer}`,
  severity: 'error',
  comment: `src/${layer}/ sits below ${LAYERS.slice(i + 1).join(', ')} (LAYERS in .dependency-cruiser.js): it must not import them. Move the type or interface both need down to the layer that owns it, or let the lower layer declare what it needs and the higher one implement it.`,
  from: { path: `^src/${layer}/` },
  to: { path: `^src/(${LAYERS.slice(i + 1).join('|')})/` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Part of an import cycle (type-only imports count). Move what both files need to a third, or to the lower one.',
      from: { path: '^(src|bench)/' },
      to: { circular: true },
    },
    {
      name: 'no-unknown-folder',
      severity: 'error',
      comment: 'Every folder of src/ has its place in LAYERS (.dependency-cruiser.js).',
      from: { path: '^src/' },
      to: { path: '^src/[^/]+/', pathNot: `^src/(${LAYERS.join('|')})/` },
    },
    ...layerRules,
    {
      name: 'wiring-on-top',
      severity: 'error',
      comment:
        'The files at the top of src/ (main, gateway, app, server) wire the folders; no folder imports them.',
      from: { path: '^src/[^/]+/' },
      to: { path: '^src/[^/]+[.]ts$' },
    },
  ],
  options: {
    includeOnly: '^(src|bench)/',
    // Type-only imports are dependencies too: a cycle of types is still a cycle.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
