import type { Logger } from 'pino';
import { createLogger } from '../../src/http/logger.ts';

/**
 * A logger for a replica that keeps what it says about Keycloak nodes, one line a change,
 * e.g. `0 down: /auth proxy: unreachable` or `1 up: probe answered`.
 */
export function recordNodeChanges(): { logger: Logger; nodeChanges: string[] } {
  const nodeChanges: string[] = [];
  const logger = createLogger('info', {
    write(line: string) {
      const entry = JSON.parse(line) as { msg?: string; keycloakNode?: number; reason?: string };
      if (entry.msg?.startsWith('Keycloak node')) {
        nodeChanges.push(`${entry.keycloakNode} ${entry.msg.slice(14)}: ${entry.reason}`);
      }
    },
  });
  return { logger, nodeChanges };
}
