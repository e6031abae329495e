import { describe, expect, it } from 'vitest';
import { endpointOf, estimateLag, parseLsn } from './read-routing.ts';

describe('replica lag', () => {
  const samples = [
    { at: 10_000, lsn: parseLsn('0/100') },
    { at: 12_000, lsn: parseLsn('0/200') },
    { at: 14_000, lsn: parseLsn('0/300') },
  ];

  it('reads WAL positions as byte offsets across the 4 GiB boundary', () => {
    expect(parseLsn('1/0') - parseLsn('0/FFFFFFFF')).toBe(1n);
    expect(parseLsn('16/B374D848')).toBe(0x16b374d848n);
  });

  it('is 0 for a replica that replayed what the primary had flushed at the last check, however old its last commit', () => {
    expect(estimateLag(samples, 14_050, parseLsn('0/300'), 3_600)).toBe(0);
  });

  it('after an idle hour, one new commit not yet replayed costs the time since the last check it had caught up with', () => {
    expect(estimateLag(samples, 15_000, parseLsn('0/200'), 3_600)).toBe(3);
  });

  it('is the age of the last replayed transaction when that is the tighter bound', () => {
    expect(estimateLag(samples, 15_000, parseLsn('0/200'), 1.5)).toBe(1.5);
  });

  it('is unknown (infinite) for a replica behind every kept check with no replayed transaction', () => {
    expect(estimateLag(samples, 15_000, parseLsn('0/50'), null)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('endpoints', () => {
  it('names host, port and database without credentials', () => {
    expect(endpointOf('postgresql://gantry:secret@db-replica:5433/gantry?sslmode=require')).toBe(
      'db-replica:5433/gantry',
    );
  });
});
