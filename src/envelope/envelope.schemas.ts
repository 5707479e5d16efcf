import { z } from 'zod';
import { SUCCESS_RESULT } from './envelope.ts';
import { errorCodes } from './errors.ts';

/**
 * The envelope (envelope.ts) and the times answers carry, as zod schemas: the API description
 * shows them as the components `Envelope` and `ErrorEnvelope`, and the answers' schemas use
 * `timestamp`. Kept apart from envelope.ts, which the CLI bundle shares and which stays free
 * of zod.
 */

/** The time the API description shows in examples. */
export const EXAMPLE_TS = '2026-01-02T03:04:05.678Z';

/** A time as the answers write it (`Date.toISOString()`): ISO 8601 in UTC, milliseconds included. */
export const timestamp = z.string().meta({ format: 'date-time', examples: [EXAMPLE_TS] });

/** A time that may be unknown or not yet set. */
export const timestampOrNull = z.string().nullable().meta({ format: 'date-time' });

export const envelope = z
  .object({
    data: z.unknown().meta({ description: 'Payload: object, array, or null.' }),
    message: z.literal('SUCCESS'),
    result: z.literal(SUCCESS_RESULT),
    ts: timestamp,
  })
  .meta({
    id: 'Envelope',
    description: 'The platform envelope of a successful answer (spec 2.1).',
  });

const RESULT_CODES = Object.values(errorCodes)
  .map(({ status, result, message }) => `\`${result}\` (${status}) ${message}`)
  .join('\n- ');

export const errorEnvelope = z
  .object({
    data: z.unknown().meta({ description: 'null, or details safe to show (never credentials).' }),
    message: z.string().meta({ description: 'Human-readable; 5xx messages stay generic.' }),
    result: z.string().regex(/^[1-5][0-9]{2}-[0-9]{5}$/),
    ts: timestamp,
  })
  .meta({
    id: 'ErrorEnvelope',
    description: `The envelope of a failure. \`result\` is \`SSS-FFNNN\` (HTTP status, function, sequence):\n- ${RESULT_CODES}`,
  });
