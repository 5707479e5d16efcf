import type { Logger } from 'pino';
import type { ReplicaBus } from '../../cache/replica-bus.ts';

export interface KeySetEvents {
  /** The realm's key providers changed: its key set is fetched again here, and on every replica. */
  changed(realm: string): Promise<void>;
}

/** A realm name as Keycloak allows it, well within; anything else on the channel is ignored. */
const MAX_REALM_LENGTH = 255;

/**
 * Spreads "this realm's key providers changed" between replicas (a change through one replica's
 * admin listener), so that every replica fetches the realm's key set again at once rather than
 * at its next scheduled refresh. Nothing is stored: a replica that misses the message (Redis
 * down, or started later) refreshes on its own schedule, or fetched the set after the change.
 */
export async function createKeySetEvents(options: {
  bus?: ReplicaBus;
  keyPrefix: string;
  logger: Logger;
  /** The key-set registry's refresh (jwks.ts). */
  refresh: (realm: string) => Promise<void>;
}): Promise<KeySetEvents> {
  const { bus, refresh, logger } = options;
  if (!bus) return { changed: refresh };
  const channel = `${options.keyPrefix}key-sets`;
  await bus.subscribe(channel, (payload) => {
    const message = readMessage(payload);
    if (!message) {
      logger.error('key-set channel: unreadable message');
      return;
    }
    if (message.from === bus.replicaId) return;
    refresh(message.realm).catch((err: unknown) =>
      logger.warn({ err, realm: message.realm }, 'could not refresh a key set a replica changed'),
    );
  });
  return {
    async changed(realm) {
      await refresh(realm);
      try {
        await bus.publish(channel, JSON.stringify({ realm, from: bus.replicaId }));
      } catch (err) {
        logger.error({ err, realm }, 'key-set change refreshed on this replica only: Redis failed');
      }
    },
  };
}

function readMessage(payload: string): { realm: string; from: string } | undefined {
  try {
    const value = JSON.parse(payload) as { realm?: unknown; from?: unknown } | null;
    const { realm, from } = value ?? {};
    if (typeof realm !== 'string' || typeof from !== 'string') return undefined;
    if (realm === '' || realm.length > MAX_REALM_LENGTH) return undefined;
    return { realm, from };
  } catch {
    return undefined;
  }
}
