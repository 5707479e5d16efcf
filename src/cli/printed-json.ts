/**
 * JSON as printed: DEL and the C1 controls, which JSON leaves as they are (a terminal may take
 * U+009B for CSI), escaped like the C0 ones, so a server's text cannot drive the terminal; a
 * parser reads the same value.
 */
export function printedJson(value: unknown): string {
  return String(JSON.stringify(value, null, 2)).replace(
    /[\u007f-\u009f]/g,
    (control) => `\\u${control.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
