import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ReplicaBus } from '../../cache/replica-bus.ts';
import { readReplicaMessage } from '../../cache/replica-message.ts';
import { realmName } from '../../tenancy/id-schemas.ts';
import type { JwksRegistry } from './jwks.ts';

/** A forced refresh as it travels between replicas (and workers). */
const refreshMessage = z.object({
  realm: realmName,
  /** The replica that asked: it has refreshed already. */
  from: z.string(),
  /** Makes each message distinct: a worker drops a payload that arrives twice (worker-bus.ts). */
  id: z.string(),
});
type RefreshMessage = z.infer<typeof refreshMessage>;

export interface KeySetEvents {
  /**
   * Tells every other replica (and worker) to fetch `realm`'s key set now, and fetches it here;
   * resolves once this replica's fetch is over (the others fetch as the message reaches them).
   */
  refreshEverywhere(realm: string): Promise<void>;
}

/**
 * Spreads a forced key-set refresh (an operator who removed a leaked key) over the replica bus,
 * so that every replica drops the removed key at once instead of at its next scheduled fetch.
 * Nothing is stored: a replica that misses the message (Redis down, or started later) fetches
 * the set on its schedule, or on its first token. Without a bus only this process refreshes.
 */
export async function createKeySetEvents(options: {
  bus?: ReplicaBus;
  keyPrefix: string;
  jwks: Pick<JwksRegistry, 'refresh'>;
  logger: Logger;
}): Promise<KeySetEvents> {
  const { bus, jwks, logger } = options;
  if (!bus) return { refreshEverywhere: (realm) => jwks.refresh(realm) };

  const channel = `${options.keyPrefix}key-sets`;
  await bus.subscribe(channel, (payload) => {
    const message = readReplicaMessage(payload, refreshMessage);
    if (!message) {
      logger.error('key-set channel: unreadable message');
      return;
    }
    if (message.from !== bus.replicaId) void jwks.refresh(message.realm);
  });

  return {
    async refreshEverywhere(realm) {
      const message: RefreshMessage = { realm, from: bus.replicaId, id: randomUUID() };
      try {
        await bus.publish(channel, JSON.stringify(message));
      } catch (err) {
        logger.error(
          { err, realm },
          'forced key-set refresh applies to this replica only; the others fetch on their schedule',
        );
      }
      await jwks.refresh(realm);
    },
  };
}
