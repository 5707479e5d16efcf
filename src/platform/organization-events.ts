import type { Logger } from 'pino';
import { z } from 'zod';
import type { ReplicaBus } from '../cache/replica-bus.ts';
import { readReplicaMessage } from '../cache/replica-message.ts';
import type { OrganizationState } from '../tenancy/organization-state.ts';

/** An organization changed through the API: disabled, enabled again, or deleted (`absent`). */
export interface OrganizationChange {
  organizationId: string;
  state: OrganizationState;
}

/** A change as it travels between replicas. */
const changeMessage = z.object({
  organizationId: z.string(),
  state: z.enum(['enabled', 'disabled', 'absent'] satisfies OrganizationState[]),
  /** The replica that made it: it ignores its own message, having applied it already. */
  from: z.string(),
});

export interface OrganizationEvents {
  /** Applies the change on this replica at once and tells every other replica. */
  announce(change: OrganizationChange): Promise<void>;
  /** Calls `listener` with each change this replica applies, its own and the others'. */
  onApplied(listener: (change: OrganizationChange) => void): void;
}

/**
 * Spreads organization changes between replicas so that a disabled or deleted organization is
 * refused everywhere at once. With the replica bus (Redis) each change is published on a channel
 * and every replica applies it within milliseconds; nothing is stored, as the database is the truth and
 * a replica that missed a message (Redis down, or started later) reads it there with its next
 * directory lookup. Messages may arrive in the reverse of the order their changes were committed
 * in (each is published after its commit, outside the organization's row lock): what `apply`
 * does (platform.area.ts) reads the organization from the database again, and that answer wins.
 * Without Redis only this replica learns at once; the others on their next lookup (see
 * organization-directory.ts, at most a minute).
 */
export async function createOrganizationEvents(options: {
  bus?: ReplicaBus;
  keyPrefix: string;
  logger: Logger;
  /** What a change means for this replica (the directory's `learn`, then its `reread`). */
  apply: (change: OrganizationChange) => void;
}): Promise<OrganizationEvents> {
  const bus = options.bus;
  const listeners: ((change: OrganizationChange) => void)[] = [];
  const apply = (change: OrganizationChange) => {
    options.apply(change);
    for (const listener of listeners) listener(change);
  };
  const onApplied = (listener: (change: OrganizationChange) => void) => {
    listeners.push(listener);
  };
  if (!bus) {
    return { announce: (change) => Promise.resolve(apply(change)), onApplied };
  }

  const channel = `${options.keyPrefix}organizations`;
  await bus.subscribe(channel, (payload) => {
    const message = readReplicaMessage(payload, changeMessage);
    if (!message) {
      options.logger.error('organization channel: unreadable message');
      return;
    }
    if (message.from !== bus.replicaId) {
      apply({ organizationId: message.organizationId, state: message.state });
    }
  });

  return {
    async announce(change) {
      apply(change);
      try {
        await bus.publish(channel, JSON.stringify({ ...change, from: bus.replicaId }));
      } catch (err) {
        options.logger.error(
          { err, organization: change.organizationId },
          'organization change applies to this replica only until the others look it up',
        );
      }
    },
    onApplied,
  };
}
