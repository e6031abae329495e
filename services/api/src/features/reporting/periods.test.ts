import { describe, expect, it } from 'vitest';
import { splitDays, splitRange } from './periods.ts';

const at = (value: string) => new Date(value);

describe('splitRange', () => {
  it('reads a year cut inside days as whole months, whole days around them and the partial days live', () => {
    expect(splitRange(at('2025-11-22T13:00:00Z'), at('2026-11-22T09:30:00Z'))).toEqual({
      months: { from: '2025-12-01', to: '2026-11-01' },
      days: [
        { from: '2025-11-23', to: '2025-12-01' },
        { from: '2026-11-01', to: '2026-11-22' },
      ],
      live: [
        { from: at('2025-11-22T13:00:00Z'), to: at('2025-11-23T00:00:00Z') },
        { from: at('2026-11-22T00:00:00Z'), to: at('2026-11-22T09:30:00Z') },
      ],
    });
  });

  it('uses months alone for month-aligned bounds', () => {
    expect(splitRange(at('2026-01-01T00:00:00Z'), at('2026-04-01T00:00:00Z'))).toEqual({
      months: { from: '2026-01-01', to: '2026-04-01' },
      days: [],
      live: [],
    });
  });

  it('uses days alone inside one month, and rows alone inside one day', () => {
    expect(splitRange(at('2026-03-03T00:00:00Z'), at('2026-03-20T00:00:00Z'))).toEqual({
      months: null,
      days: [{ from: '2026-03-03', to: '2026-03-20' }],
      live: [],
    });
    expect(splitRange(at('2026-03-03T01:00:00Z'), at('2026-03-03T02:00:00Z'))).toEqual({
      months: null,
      days: [],
      live: [{ from: at('2026-03-03T01:00:00Z'), to: at('2026-03-03T02:00:00Z') }],
    });
    expect(splitRange(at('2026-03-03T23:00:00Z'), at('2026-03-04T01:00:00Z'))).toEqual({
      months: null,
      days: [],
      live: [{ from: at('2026-03-03T23:00:00Z'), to: at('2026-03-04T01:00:00Z') }],
    });
  });

  it('keeps open bounds open', () => {
    expect(splitRange(null, null)).toEqual({ months: { from: null, to: null }, days: [], live: [] });
    expect(splitRange(at('2026-03-03T12:00:00Z'), null)).toEqual({
      months: { from: '2026-04-01', to: null },
      days: [{ from: '2026-03-04', to: '2026-04-01' }],
      live: [{ from: at('2026-03-03T12:00:00Z'), to: at('2026-03-04T00:00:00Z') }],
    });
    expect(splitRange(null, at('2026-03-03T12:00:00Z'))).toEqual({
      months: { from: null, to: '2026-03-01' },
      days: [{ from: '2026-03-01', to: '2026-03-03' }],
      live: [{ from: at('2026-03-03T00:00:00Z'), to: at('2026-03-03T12:00:00Z') }],
    });
  });
});

describe('splitDays', () => {
  it('gives the whole days and the partial edges of a range', () => {
    expect(splitDays(at('2026-03-03T12:00:00Z'), at('2026-03-05T00:00:00Z'))).toEqual({
      days: { from: at('2026-03-04T00:00:00Z'), to: at('2026-03-05T00:00:00Z') },
      live: [{ from: at('2026-03-03T12:00:00Z'), to: at('2026-03-04T00:00:00Z') }],
    });
    expect(splitDays(null, null)).toEqual({ days: { from: null, to: null }, live: [] });
  });
});
