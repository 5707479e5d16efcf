import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readReplicaMessage } from '../../../src/cache/replica-message.ts';

const message = z.object({ realm: z.string(), at: z.number() });

describe('readReplicaMessage: a replica channel payload read as hostile input', () => {
  it('reads a message of the schema', () => {
    expect(readReplicaMessage('{"realm":"acme","at":1}', message)).toEqual({
      realm: 'acme',
      at: 1,
    });
  });

  it('drops members the schema does not name (a newer replica may add one)', () => {
    expect(readReplicaMessage('{"realm":"acme","at":1,"new":[1]}', message)).toEqual({
      realm: 'acme',
      at: 1,
    });
  });

  it.each([
    ['not JSON', '{"realm":'],
    ['null', 'null'],
    ['an array', '[]'],
    ['a member missing', '{"realm":"acme"}'],
    ['a member of another type', '{"realm":"acme","at":"1"}'],
    ['an empty payload', ''],
  ])('refuses %s', (_name, payload) => {
    expect(readReplicaMessage(payload, message)).toBeUndefined();
  });
});
