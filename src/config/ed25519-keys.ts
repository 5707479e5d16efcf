import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';

/**
 * The Ed25519 keys of audit checkpoints as settings give them (PEM): read here once, for the
 * schema's check at start and for the signer, so both take the same keys.
 */

/** A PKCS#8 PEM private key, which must be Ed25519; throws a message naming no key material. */
export function ed25519PrivateKeyOf(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    throw new Error('is not a PEM private key');
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new Error(`must be an Ed25519 key, not ${key.asymmetricKeyType ?? 'a symmetric one'}`);
  }
  return key;
}

const PUBLIC_PEM = /-----BEGIN PUBLIC KEY-----[\s\S]*?-----END PUBLIC KEY-----/g;

/** Every `PUBLIC KEY` PEM block of `pems` (one after the other), each of which must be Ed25519. */
export function ed25519PublicKeysOf(pems: string): KeyObject[] {
  const blocks = pems.match(PUBLIC_PEM) ?? [];
  if (blocks.length === 0) throw new Error('holds no PEM public key');
  return blocks.map((block, i) => {
    let key: KeyObject;
    try {
      key = createPublicKey({ key: block, format: 'pem' });
    } catch {
      throw new Error(`key ${i + 1} is not a PEM public key`);
    }
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`key ${i + 1} is not Ed25519`);
    return key;
  });
}
