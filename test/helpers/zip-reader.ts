import { crc32, inflateRawSync } from 'node:zlib';

/**
 * The entries of a zip, read from its central directory as an unzip tool does (a streamed zip
 * keeps the sizes there, not in its local headers), each checked against its CRC-32.
 */
export function readZip(zip: Buffer): { name: string; content: Buffer }[] {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end === -1) throw new Error('no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  const entries: { name: string; content: Buffer }[] = [];
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error('bad central directory entry');
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const compressed = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(dataAt, dataAt + compressed);
    const content = method === 8 ? inflateRawSync(raw) : Buffer.from(raw);
    if (crc32(content) !== crc) throw new Error(`${name}: CRC-32 does not match`);
    entries.push({ name, content });
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}
