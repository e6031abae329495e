import { describe, expect, it } from 'vitest';
import { findIllFormedText, mayHoldSurrogateEscape } from './text.ts';

describe('findIllFormedText', () => {
  it.each([
    [{ title: 'ok', items: [{ name: 'a' }, { name: 'b' }, { name: 'x\ud800' }] }, 'items[2].name'],
    [{ title: '\udc00' }, 'title'],
    [{ nested: { '\ud800key': 1 } }, 'nested.\ud800key'],
    ['\ud800', ''],
    [[1, ['\udfff']], '[1][0]'],
    [{ first: '\ud800', second: '\ud800' }, 'first'],
  ])('finds the first ill-formed string of %j at %j', (value, path) => {
    expect(findIllFormedText(value)).toBe(path);
  });

  it('passes well-formed text, surrogate pairs and U+FFFD sent as such', () => {
    expect(findIllFormedText({ a: ['😀', '\ud83d\ude00', '\ufffd', ''], b: null, c: 1 })).toBeNull();
  });

  it('walks a deeply nested value without overflowing the stack', () => {
    let deep: unknown = '\ud800';
    for (let depth = 0; depth < 100_000; depth++) deep = [deep];
    expect(findIllFormedText(deep)).toMatch(/^(\[0\]){100000}$/);
  });
});

describe('mayHoldSurrogateEscape', () => {
  it('is true only for text with a \\uD800–\\uDFFF escape', () => {
    expect(mayHoldSurrogateEscape(String.raw`{"a":"\ud800"}`)).toBe(true);
    expect(mayHoldSurrogateEscape(String.raw`{"a":"\uDFFF"}`)).toBe(true);
    expect(mayHoldSurrogateEscape(String.raw`{"a":"\u00e9 \ud7ff"}`)).toBe(false);
    expect(mayHoldSurrogateEscape('{"a":"😀"}')).toBe(false);
  });
});
