/** Credentials carried by an `Authorization: Basic` header. */
export interface BasicCredentials {
  username: string;
  password: string;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Longest credential part accepted; far beyond any real user name or password. */
const MAX_ENCODED_LENGTH = 4096;

/**
 * Parses the credentials of a Basic header value (the part after the scheme). Strict: valid
 * padded base64, UTF-8, split at the FIRST colon so passwords may contain `:`, and neither
 * part empty. Returns a reason instead of throwing, for the 401 message.
 */
export function parseBasicCredentials(encoded: string): BasicCredentials | { invalid: string } {
  const value = encoded.trim();
  if (value.length === 0) return { invalid: 'Basic credentials are missing.' };
  if (value.length > MAX_ENCODED_LENGTH) return { invalid: 'Malformed Basic credentials.' };
  if (!BASE64.test(value) || value.length % 4 !== 0)
    return { invalid: 'Basic credentials are not valid base64.' };
  let decoded: string;
  try {
    decoded = utf8.decode(Buffer.from(value, 'base64'));
  } catch {
    return { invalid: 'Basic credentials are not valid UTF-8.' };
  }
  const colon = decoded.indexOf(':');
  if (colon < 0) return { invalid: 'Basic credentials need user:password.' };
  const username = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (username.length === 0 || password.length === 0) {
    return { invalid: 'Basic credentials need a user name and a password.' };
  }
  // Control characters never belong in a user name; they would only confuse logs and lookups.
  if (hasControlCharacters(username)) return { invalid: 'Malformed Basic credentials.' };
  return { username, password };
}

/** Whether `value` holds a C0 control character or DEL (line breaks included). */
function hasControlCharacters(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}
