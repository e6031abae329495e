import { describe, expect, it } from 'vitest';
import { assertWellFormedHeader, assertWellFormedQuery, decodeUtf8Body } from './text.ts';

describe('decodeUtf8Body', () => {
  it('decodes UTF-8 and drops a leading byte order mark', () => {
    expect(decodeUtf8Body(Buffer.from('\ufeff{"a":"é"}'))).toEqual({ text: '{"a":"é"}', valid: true });
  });

  it('turns each byte outside a well-formed sequence into a lone surrogate, never U+FFFD', () => {
    const bytes = Buffer.concat([Buffer.from('{"a":"x'), Buffer.from([0xff, 0xed, 0xa0, 0x80]), Buffer.from('é"}')]);
    const { text, valid } = decodeUtf8Body(bytes);
    expect(valid).toBe(false);
    expect(text).toBe('{"a":"x\udcff\udced\udca0\udc80é"}');
    expect(text).not.toContain('\ufffd');
  });

  it('keeps a U+FFFD that was sent as its UTF-8 bytes', () => {
    expect(decodeUtf8Body(Buffer.from('{"a":"\ufffd"}'))).toEqual({ text: '{"a":"\ufffd"}', valid: true });
  });
});

describe('assertWellFormedQuery', () => {
  it.each(['q=abc', 'q=%C3%A9t%C3%A9&limit=5', 'q=%F0%9F%98%80', 'q=%ZZ', 'a+b=c+d', ''])('accepts %j', (query) => {
    expect(() => assertWellFormedQuery(query)).not.toThrow();
  });

  it.each([
    ['q=%ED%A0%80', 'q'],
    ['limit=5&q=x%FF', 'q'],
    ['%FF=1', '%FF'],
    ['q=%C3', 'q'],
  ])('refuses %j naming %j', (query, name) => {
    expect(() => assertWellFormedQuery(query)).toThrow(`invalid query parameter ${name}: must be well-formed UTF-8`);
  });
});

describe('assertWellFormedHeader', () => {
  it('accepts ASCII and UTF-8 bytes, refuses other bytes', () => {
    expect(() => assertWellFormedHeader('Idempotency-Key', 'key-1')).not.toThrow();
    expect(() => assertWellFormedHeader('Idempotency-Key', Buffer.from('clé').toString('latin1'))).not.toThrow();
    expect(() => assertWellFormedHeader('Idempotency-Key', '\u00ed\u00a0\u0080')).toThrow(
      'invalid header Idempotency-Key: must be well-formed UTF-8',
    );
  });
});
