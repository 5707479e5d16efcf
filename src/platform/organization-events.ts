import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { OrganizationState } from '../tenancy/organization-state.ts';

/** An organization changed through the API: disabled, enabled again, or deleted (`absent`). */
export interface OrganizationChange {
  organizationId: string;
  state: OrganizationState;
}

/** A change as it travels between replicas. */
interface ChangeMessage extends OrganizationChange {
  /** The replica that made it: it ignores its own message, having applied it already. */
  from: string;
}

export interface OrganizationEvents {
  /** Applies the change on this replica at once and tells every other replica. */
  announce(change: OrganizationChange): Promise<void>;
  close(): Promise<void>;
}

const STATES = new Set<unknown>(['enabled', 'disabled', 'absent'] satisfies OrganizationState[]);

/**
 * Spreads organization changes between replicas so that a disabled or deleted organization is
 * refused everywhere at once. With Redis each change is published on a channel and every
 * replica applies it within milliseconds; nothing is stored, as the database is the truth and
 * a replica that missed a message (Redis down, or started later) reads it there with its next
 * directory lookup. Without Redis only this replica learns at once; the others on their next
 * lookup (see organization-directory.ts, at most a minute).
 */
export async function createOrganizationEvents(options: {
  redisUrl?: string;
  keyPrefix: string;
  logger: Logger;
  /** What a change means for this replica (the directory's `learn`). */
  apply: (change: OrganizationChange) => void;
}): Promise<OrganizationEvents> {
  if (!options.redisUrl) {
    return {
      announce: (change) => Promise.resolve(options.apply(change)),
      close: () => Promise.resolve(),
    };
  }

  const replicaId = randomUUID();
  const channel = `${options.keyPrefix}organizations`;
  const redisOptions = { maxRetriesPerRequest: 1, commandTimeout: 1000, lazyConnect: true };
  const publisher = new Redis(options.redisUrl, redisOptions);
  const subscriber = new Redis(options.redisUrl, redisOptions);
  for (const client of [publisher, subscriber]) {
    client.on('error', (err: Error) =>
      options.logger.warn({ err }, 'organization channel: Redis error'),
    );
  }
  subscriber.on('message', (_channel: string, payload: string) => {
    const message = readMessage(payload);
    if (!message) {
      options.logger.error('organization channel: unreadable message');
      return;
    }
    if (message.from !== replicaId) {
      options.apply({ organizationId: message.organizationId, state: message.state });
    }
  });
  try {
    await subscriber.connect();
    await subscriber.subscribe(channel);
    await publisher.connect();
  } catch (err) {
    options.logger.error({ err }, 'organization changes are not shared: Redis is unreachable');
  }

  return {
    async announce(change) {
      options.apply(change);
      try {
        await publisher.publish(channel, JSON.stringify({ ...change, from: replicaId }));
      } catch (err) {
        options.logger.error(
          { err, organization: change.organizationId },
          'organization change applies to this replica only until the others look it up',
        );
      }
    },
    async close() {
      subscriber.disconnect();
      await publisher.quit().catch(() => publisher.disconnect());
    },
  };
}

/** A message of the channel, or undefined when it is not one (anyone with Redis access can publish). */
function readMessage(payload: string): ChangeMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const message = value as Partial<ChangeMessage> | null;
  if (
    typeof message?.organizationId !== 'string' ||
    typeof message.from !== 'string' ||
    !STATES.has(message.state)
  ) {
    return undefined;
  }
  return message as ChangeMessage;
}
