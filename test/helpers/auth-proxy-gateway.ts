import { createServer, type Server } from 'node:http';
import express, { type RequestHandler } from 'express';
import { createAuthProxy, type AuthProxyOptions } from '../../src/auth-proxy/auth-proxy.ts';
import { createForwarding } from '../../src/edge/forwarding.ts';
import { createLogger } from '../../src/http/logger.ts';
import { listenLocally } from './local-server.ts';

/**
 * An express app on a free port of 127.0.0.1 with the `/auth` proxy to `options.nodes` mounted
 * behind `steps` (the form guard, a test's hook), forwarding claims off and its log silent.
 * Resolves with its server (the test closes it) and its base URL.
 */
export async function startAuthProxyGateway(
  steps: RequestHandler[],
  options: Omit<AuthProxyOptions, 'forwarding' | 'logger'>,
): Promise<{ server: Server; base: string }> {
  const app = express();
  app.use(
    '/auth',
    ...steps,
    createAuthProxy({
      ...options,
      forwarding: createForwarding(undefined),
      logger: createLogger('silent'),
    }),
  );
  const server = createServer(app);
  return { server, base: await listenLocally(server) };
}
