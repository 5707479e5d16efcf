/**
 * Whether Keycloak reads a request body's text as the gateway's guards do (UTF-8): the one
 * check of the form guard (form-body-guard.ts) and of the admin API JSON end-access.ts reads.
 */

/**
 * Keycloak decodes a form's percent-escapes in the charset its `Content-Type` names (any Java
 * knows: UTF-16, EBCDIC's IBM037, ...), where the guards read UTF-8: `%00a%00d...` under
 * `charset=UTF-16BE` is a name only Keycloak would read, past the bootstrap administrator's
 * guard and the throttle. UTF-8 is read as the guards read it; the charsets that agree with
 * ASCII on its 128 characters (what older Java clients declare) only for a body that is ASCII
 * once decoded; any other is refused.
 */
const UTF8_NAMES: ReadonlySet<string> = new Set(['utf-8', 'utf8']);
const ASCII_COMPATIBLE_NAMES: ReadonlySet<string> = new Set([
  'us-ascii',
  'ascii',
  'iso-8859-1',
  'iso8859-1',
  'iso_8859-1',
  'latin1',
  'windows-1252',
  'cp1252',
]);
const CHARSET_PARAMETER = /;\s*charset\s*=\s*("[^"]*"|[^;]*)/gi;
/** A byte or a percent-escape beyond ASCII. */
const BEYOND_ASCII = /[\u0080-\uffff]|%[89a-f][0-9a-f]/i;

/**
 * Whether the body `text` (read as UTF-8) reads the same under every charset the request's
 * `Content-Type` headers name (each one: Keycloak may read another than Node's first).
 */
export function readsAsUtf8(rawHeaders: readonly string[], text: string): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'content-type') continue;
    for (const [, value] of rawHeaders[i + 1]!.matchAll(CHARSET_PARAMETER)) {
      const name = value!.replace(/^"|"$/g, '').trim().toLowerCase();
      if (UTF8_NAMES.has(name)) continue;
      if (!ASCII_COMPATIBLE_NAMES.has(name) || BEYOND_ASCII.test(text)) return false;
    }
  }
  return true;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/**
 * The text of a JSON body as Keycloak reads it, when that is UTF-8; else undefined. Keycloak
 * (Jackson) reads JSON in the encoding its first bytes suggest (UTF-16 or UTF-32, with or
 * without a byte-order mark; UTF-8 past its mark), whatever the charset says: `{"enabled":false}`
 * in UTF-16 disables a user the gateway, reading UTF-8, would see nothing done to.
 */
export function utf8JsonTextOf(rawHeaders: readonly string[], bytes: Buffer): string | undefined {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return undefined;
  }
  // A byte-order mark, or a NUL: JSON in UTF-16 or UTF-32 has one in its first bytes, and UTF-8
  // JSON has neither (a NUL must be escaped, a BOM is no JSON).
  const otherEncoding = text.startsWith('\uFEFF') || text.includes('\u0000');
  return otherEncoding || !readsAsUtf8(rawHeaders, text) ? undefined : text;
}
