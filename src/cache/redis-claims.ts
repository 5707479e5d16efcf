import type { Redis } from 'ioredis';

/**
 * `SET key 1 PX ttl NX` for each key of the call, in one script run: 1 where it stored the key,
 * 0 where the key was there. The keys are the ones a lone SET NX would use, so a replica that
 * claims one key at a time and one that claims in batches refuse each other's second claim.
 */
const CLAIM_KEYS = `local claimed = {}
for i, key in ipairs(KEYS) do
  claimed[i] = redis.call('SET', key, '1', 'PX', ARGV[i], 'NX') and 1 or 0
end
return claimed`;

/** At most this many keys in one script run, so a burst never holds Redis for long. */
export const MAX_CLAIMS_PER_COMMAND = 256;

interface PendingClaim {
  key: string;
  ttlMs: number;
  resolve: (claimed: boolean) => void;
  reject: (error: Error) => void;
}

/**
 * The script's command on the client; the client leaves it out of its auto-pipelining, which
 * would only defer each batch by one more turn.
 */
export const CLAIM_COMMAND = 'claimKeys';

interface ClaimScript {
  claimKeys(count: number, ...keysThenTtls: (string | number)[]): Promise<number[]>;
}

/**
 * Claims (`Cache.claim`) sent to Redis together: those of one turn of the event loop, and those
 * made while the previous batch is out, leave as one command, the script above. A DPoP proof's
 * one-time use is a claim per request; as separate commands (even auto-pipelined) each costs
 * the gateway an ioredis command, a promise of the pipeline and a reply of its own, three times
 * what its share of one command costs (bench/results.md, "DPoP"). Each claim still answers for
 * its own key, atomically in Redis; a batch that fails rejects each of its claims, which the
 * fallback cache then serves one by one.
 */
export function createRedisClaims(client: Redis): (key: string, ttlMs: number) => Promise<boolean> {
  client.defineCommand(CLAIM_COMMAND, { lua: CLAIM_KEYS });
  const script = client as unknown as ClaimScript;
  let pending: PendingClaim[] = [];
  let scheduled = false;
  let inFlight = 0;

  const send = (batch: PendingClaim[]): void => {
    inFlight++;
    const args: (string | number)[] = batch.map((claim) => claim.key);
    for (const claim of batch) args.push(claim.ttlMs);
    script.claimKeys(batch.length, ...args).then(
      (replies) => {
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(replies[i] === 1);
        done();
      },
      (error: Error) => {
        for (const claim of batch) claim.reject(error);
        done();
      },
    );
  };
  const flush = (): void => {
    scheduled = false;
    const waiting = pending;
    pending = [];
    for (let from = 0; from < waiting.length; from += MAX_CLAIMS_PER_COMMAND) {
      send(waiting.slice(from, from + MAX_CLAIMS_PER_COMMAND));
    }
  };
  // The claims made while a batch was out leave as soon as it is back.
  const done = (): void => {
    inFlight--;
    if (inFlight === 0 && pending.length > 0 && !scheduled) flush();
  };

  return (key, ttlMs) =>
    new Promise<boolean>((resolve, reject) => {
      pending.push({ key, ttlMs, resolve, reject });
      if (inFlight === 0 && !scheduled) {
        scheduled = true;
        // After this turn's I/O callbacks: the other requests already read make their claims.
        setImmediate(flush);
      }
    });
}
