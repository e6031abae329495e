import { describe, expect, it } from 'vitest';
import { parseRfc3339 } from './device-messages.ts';

/** The regex-and-Date parser this one replaced: the reference for every input below. */
function referenceRfc3339(value: string): number {
  const match = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/.exec(value);
  if (!match) return Number.NaN;
  const [, year, month, day, hour, minute, second, fraction = '', zone = 'Z'] = match;
  const ms = fraction ? Number(fraction.slice(1, 4).padEnd(3, '0')) : 0;
  const utc = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), ms);
  const check = new Date(utc);
  if (
    check.getUTCMonth() !== Number(month) - 1 ||
    check.getUTCDate() !== Number(day) ||
    Number(hour) > 23 ||
    Number(minute) > 59 ||
    Number(second) > 60
  )
    return Number.NaN;
  if (zone === 'Z' || zone === 'z') return utc;
  const sign = zone[0] === '-' ? -1 : 1;
  return utc - sign * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
}

describe('parseRfc3339', () => {
  it('reads device timestamps to the millisecond, with any zone offset', () => {
    expect(parseRfc3339('2026-03-10T11:59:58.250Z')).toBe(Date.UTC(2026, 2, 10, 11, 59, 58, 250));
    expect(parseRfc3339('2026-03-10T13:59:58.2506789+02:00')).toBe(Date.UTC(2026, 2, 10, 11, 59, 58, 250));
    expect(parseRfc3339('2024-02-29 00:00:00z')).toBe(Date.UTC(2024, 1, 29));
  });

  it('rejects dates that do not exist and malformed strings', () => {
    for (const value of [
      '2023-02-29T00:00:00Z',
      '2024-04-31T00:00:00Z',
      '2024-01-01T24:00:00Z',
      '2024-01-01T00:00:00',
      '',
    ])
      expect(parseRfc3339(value)).toBeNaN();
  });

  it('gives what the regex parser gave for every variation of each position', () => {
    const bases = [
      '2026-03-10T11:59:58.250Z',
      '2024-02-29T23:59:60Z',
      '2024-12-31T23:59:60.5-01:30',
      '0099-02-29T12:30:60.123456789+14:00',
      '1900-02-28t00:00:00.1z',
      '2000-02-29 10:10:10.12+00:00',
    ];
    const replacements = ['0', '1', '2', '3', '5', '6', '9', ':', '-', '+', 'T', 't', ' ', 'Z', 'z', '.', 'a', '٣', ''];
    let compared = 0;
    for (const base of bases) {
      for (let index = 0; index <= base.length; index += 1) {
        for (const replacement of replacements) {
          for (const value of [
            base.slice(0, index) + replacement + base.slice(index + 1),
            base.slice(0, index) + replacement + base.slice(index),
          ]) {
            const expected = referenceRfc3339(value);
            const actual = parseRfc3339(value);
            if (!Object.is(actual, expected)) expect({ value, actual }).toEqual({ value, actual: expected });
            compared += 1;
          }
        }
      }
    }
    expect(compared).toBeGreaterThan(1000);
  });
});
