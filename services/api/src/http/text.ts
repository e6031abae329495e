import { isUtf8 } from 'node:buffer';
import { ValidationError } from '../errors.ts';

// Text Gantry keeps is the text that was sent, or the request is refused. Two things
// cannot be kept as sent: a lone surrogate (a \uD800–\uDFFF escape in JSON with no
// partner), which PostgreSQL refuses in jsonb and which UTF-8 cannot encode (a text
// column would get U+FFFD instead), and bytes that are not UTF-8, which a lenient decoder
// turns into U+FFFD. Both are refused where the request is read, with a 400 naming the
// field, before anything is stored (JSON values are walked by findIllFormedText, in
// @gantry/contracts).

/** Why such text is refused, in the 400's message. */
export const ILL_FORMED_TEXT = 'must be well-formed UTF-8 text (no lone surrogate \\uD800–\\uDFFF, no invalid bytes)';

/** Length of the well-formed UTF-8 sequence starting at `at` (Unicode table 3-7), or 0. */
function sequenceLength(bytes: Uint8Array, at: number): number {
  const first = bytes[at]!;
  if (first < 0x80) return 1;
  const next = (offset: number, low = 0x80, high = 0xbf) => {
    const byte = bytes[at + offset];
    return byte !== undefined && byte >= low && byte <= high;
  };
  if (first >= 0xc2 && first <= 0xdf) return next(1) ? 2 : 0;
  if (first === 0xe0) return next(1, 0xa0) && next(2) ? 3 : 0;
  if (first === 0xed) return next(1, 0x80, 0x9f) && next(2) ? 3 : 0;
  if (first >= 0xe1 && first <= 0xef) return next(1) && next(2) ? 3 : 0;
  if (first === 0xf0) return next(1, 0x90) && next(2) && next(3) ? 4 : 0;
  if (first >= 0xf1 && first <= 0xf3) return next(1) && next(2) && next(3) ? 4 : 0;
  if (first === 0xf4) return next(1, 0x80, 0x8f) && next(2) && next(3) ? 4 : 0;
  return 0;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes a body as UTF-8, a leading byte order mark dropped (RFC 8259 §8.1 lets a
 * parser ignore it; some clients, PowerShell's among them, add it). A byte that is not
 * part of a well-formed sequence becomes a lone surrogate (U+DC80–U+DCFF, as Python's
 * surrogateescape), never U+FFFD: findIllFormedText then names the field that held it,
 * and nothing that was not sent can be stored. `valid` tells whether any byte was bad.
 */
export function decodeUtf8Body(bytes: Buffer): { text: string; valid: boolean } {
  try {
    return { text: strictUtf8.decode(bytes), valid: true };
  } catch {
    const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
    let text = '';
    let from = start;
    for (let at = start; at < bytes.length; ) {
      const length = sequenceLength(bytes, at);
      if (length > 0) {
        at += length;
        continue;
      }
      text += bytes.toString('utf8', from, at) + String.fromCharCode(0xdc00 + bytes[at]!);
      at += 1;
      from = at;
    }
    return { text: text + bytes.toString('utf8', from), valid: false };
  }
}

/** The bytes a query component stands for: `+` is a space, `%XX` a byte, anything else its own byte(s). */
function queryComponentBytes(component: string): Buffer {
  const bytes: number[] = [];
  for (let at = 0; at < component.length; at++) {
    const char = component[at]!;
    const hex = char === '%' ? component.slice(at + 1, at + 3) : '';
    if (/^[0-9a-fA-F]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      at += 2;
    } else if (char === '+') bytes.push(0x20);
    else bytes.push(...Buffer.from(char, 'latin1'));
  }
  return Buffer.from(bytes);
}

/** A name for the error: the parameter as decoded when it decodes, else as it was sent. */
function shownName(raw: string, bytes: Buffer): string {
  const name = isUtf8(bytes) ? bytes.toString('utf8') : raw;
  return name.length > 60 ? `${name.slice(0, 60)}…` : name;
}

/**
 * Refuses a query string whose parameter names or values, once percent-decoded, are not
 * UTF-8 (`?q=%ED%A0%80`, the encoding of a lone surrogate, or `?q=%FF`). Node's query
 * parser would turn them into U+FFFD without a word.
 */
export function assertWellFormedQuery(querystring: string): void {
  // Plain ASCII without escapes decodes to itself: nothing to check.
  if (!/[%\u0080-\uffff]/.test(querystring)) return;
  for (const pair of querystring.split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const rawName = equals === -1 ? pair : pair.slice(0, equals);
    const rawValue = equals === -1 ? '' : pair.slice(equals + 1);
    const name = queryComponentBytes(rawName);
    const value = queryComponentBytes(rawValue);
    if (!isUtf8(name) || !isUtf8(value)) {
      throw new ValidationError(
        `invalid query parameter ${shownName(rawName, name)}: ${ILL_FORMED_TEXT}`,
        'invalid_parameter',
      );
    }
  }
}

/**
 * Refuses a header value that is not UTF-8. Node hands header values over as Latin-1
 * (one character per byte), so the bytes are looked at as they came.
 */
export function assertWellFormedHeader(name: string, value: string): void {
  if (!/[\u0080-\uffff]/.test(value)) return;
  if (!isUtf8(Buffer.from(value, 'latin1')))
    throw new ValidationError(`invalid header ${name}: ${ILL_FORMED_TEXT}`, 'invalid_header');
}
