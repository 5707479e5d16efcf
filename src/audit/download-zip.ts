import archiver from 'archiver';
import { Readable } from 'node:stream';

/**
 * A zip of one file, made as it is read: the entry is deflated while `content` is pulled, and
 * the reader's pace is the producer's (the archive is a stream with back-pressure), so memory
 * stays bounded whatever the size. archiver: node has deflate but no zip container, and this
 * is the zip writer the Node world keeps (already in the tree through the test containers).
 */
export function zipOfOne(
  name: string,
  content: AsyncIterable<string>,
  modified: Date,
): AsyncIterable<Uint8Array> {
  const archive = archiver('zip', { zlib: { level: 6 } });
  const bytes = Readable.from(encoded(content), { objectMode: false });
  archive.append(bytes, { name, date: modified });
  // Its failures reach the reader as the stream's error; the promise would say it twice.
  archive.finalize().catch(() => undefined);
  return archive;
}

async function* encoded(content: AsyncIterable<string>): AsyncGenerator<Buffer> {
  for await (const text of content) yield Buffer.from(text, 'utf8');
}
