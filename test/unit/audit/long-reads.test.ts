import { describe, expect, it } from 'vitest';
import {
  createLongReads,
  holding,
  readUnderSlot,
  underSlot,
} from '../../../src/audit/long-reads.ts';

const busy = { status: 429, result: '429-40001', headers: { 'retry-after': '10' } };

/** `n` lines, each read as a chunk of the log would be: after a wait for the database. */
async function* lines(n: number) {
  for (let i = 0; i < n; i++) yield await Promise.resolve(`line ${i}\n`);
}

describe('long audit reads at once', () => {
  it('refuses a read past the bound at once, 429 with Retry-After, and takes one again once freed', () => {
    const reads = createLongReads(2);
    const first = reads.take();
    reads.take();
    expect(() => reads.take()).toThrow(expect.objectContaining(busy));
    first.release();
    // Given back once, however often released.
    first.release();
    reads.take();
    expect(() => reads.take()).toThrow(expect.objectContaining(busy));
  });

  it('hands a freed slot to a waiting download job before any request', async () => {
    const reads = createLongReads(1);
    const held = reads.take();
    const waiting = reads.wait();
    held.release();
    expect(() => reads.take()).toThrow(expect.objectContaining(busy));
    (await waiting).release();
    reads.take();
  });

  it('holds the slot while the lines are read, and gives it back at their end', async () => {
    const reads = createLongReads(1);
    const read = holding(reads.take(), lines(2));
    expect(await read.next()).toEqual({ done: false, value: 'line 0\n' });
    expect(() => reads.take()).toThrow(expect.objectContaining(busy));
    for await (const line of read) void line;
    reads.take();
  });

  it('gives the slot back when the client goes before the end', async () => {
    const reads = createLongReads(1);
    const read = await underSlot(reads, () => Promise.resolve(lines(1000)));
    for await (const line of read) if (line === 'line 1\n') break;
    reads.take();
  });

  it('gives the slot back when the lines fail, or when opening them fails', async () => {
    const reads = createLongReads(1);
    const failing = await underSlot(reads, () =>
      Promise.resolve(
        (async function* () {
          yield* lines(1);
          throw new Error('statement timeout');
        })(),
      ),
    );
    await expect(async () => {
      for await (const line of failing) void line;
    }).rejects.toThrow('statement timeout');
    await expect(underSlot(reads, () => Promise.reject(new Error('no span')))).rejects.toThrow(
      'no span',
    );
    reads.take();
  });
});

describe("one organization's long reads", () => {
  it('refuses a holder the last slot, which another still finds, and frees its share', () => {
    const reads = createLongReads(4);
    const first = reads.take('acme');
    reads.take('acme');
    reads.take('acme');
    expect(() => reads.take('acme')).toThrow(expect.objectContaining(busy));
    reads.take('globex');
    expect(() => reads.take('globex')).toThrow(expect.objectContaining(busy));
    first.release();
    first.release();
    reads.take('acme');
    expect(() => reads.take('acme')).toThrow(expect.objectContaining(busy));
  });

  it('holds a page read its slot until it is answered, failed or not', async () => {
    const reads = createLongReads(1);
    let answer!: (value: number) => void;
    const page = readUnderSlot(
      reads,
      () => new Promise<number>((resolve) => (answer = resolve)),
      'acme',
    );
    expect(() => reads.take('acme')).toThrow(expect.objectContaining(busy));
    answer(7);
    expect(await page).toBe(7);
    await expect(
      readUnderSlot(reads, () => Promise.reject(new Error('statement timeout')), 'acme'),
    ).rejects.toThrow('statement timeout');
    reads.take('acme');
  });
});

describe('page reads beside exports', () => {
  it("keeps a slot from the exports for page reads, the process's and each organization's", () => {
    const reads = createLongReads(4);
    reads.take('acme', 'stream');
    reads.take('acme', 'stream');
    expect(() => reads.take('acme', 'stream')).toThrow(expect.objectContaining(busy));
    reads.take('globex', 'stream');
    expect(() => reads.take('globex', 'stream')).toThrow(expect.objectContaining(busy));
    expect(() => reads.take('initech', 'stream')).toThrow(expect.objectContaining(busy));
    reads.take('initech').release();
    // The exporting organization's own administrators read a page too.
    reads.take('acme');
    expect(() => reads.take('globex')).toThrow(expect.objectContaining(busy));
  });

  it('hands a waiting download job no slot kept for page reads, and one an export frees', async () => {
    const reads = createLongReads(2);
    const exporting = reads.take('acme', 'stream');
    const waiting = reads.wait();
    reads.take('globex').release();
    // Still a page read's: the job did not take it.
    reads.take('globex').release();
    exporting.release();
    const job = await waiting;
    expect(() => reads.take('globex', 'stream')).toThrow(expect.objectContaining(busy));
    const page = reads.take('globex');
    job.release();
    page.release();
    reads.take('globex', 'stream');
  });

  it('lends the one slot of a process to whoever comes first, export or page', () => {
    const reads = createLongReads(1);
    const exporting = reads.take('acme', 'stream');
    expect(() => reads.take('globex')).toThrow(expect.objectContaining(busy));
    exporting.release();
    reads.take('globex');
  });
});
