import { describe, expect, it } from 'vitest';
import { sharedAnswers } from './shared-answers.ts';

/** A computation that finishes when the test says so, at a clock the test sets. */
function controlled() {
  const clock = { ms: 0 };
  let calls = 0;
  const pending: Array<(value: number) => void> = [];
  const compute = () => {
    calls += 1;
    const answer = calls;
    return new Promise<number>((resolve) => pending.push(() => resolve(answer)));
  };
  const finishAt = async (ms: number) => {
    clock.ms = ms;
    pending.shift()!(0);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { clock, compute, finishAt, calls: () => calls };
}

describe('sharedAnswers', () => {
  it('lets a second caller wait for the answer being computed instead of asking again', async () => {
    const c = controlled();
    const answers = sharedAnswers<number>({ now: () => c.clock.ms });
    const first = answers.get('q', c.compute);
    const second = answers.get('q', c.compute);
    await c.finishAt(10);
    expect(await first).toBe(1);
    expect(await second).toBe(1);
    expect(c.calls()).toBe(1);
  });

  it('never reuses a quick answer', async () => {
    const c = controlled();
    const answers = sharedAnswers<number>({ now: () => c.clock.ms, slowMs: 250 });
    const first = answers.get('q', c.compute);
    await c.finishAt(100);
    expect(await first).toBe(1);
    const again = answers.get('q', c.compute);
    await c.finishAt(101);
    expect(await again).toBe(2);
    expect(answers.size).toBe(0);
  });

  it('reuses a slow answer for reuseFactor times its cost, then asks again', async () => {
    const c = controlled();
    const answers = sharedAnswers<number>({ now: () => c.clock.ms, slowMs: 250, reuseFactor: 4, maxReuseMs: 30_000 });
    const first = answers.get('q', c.compute);
    await c.finishAt(1_000); // took 1 s: reused until 1 s + 4 s
    expect(await first).toBe(1);
    c.clock.ms = 4_999;
    expect(await answers.get('q', c.compute)).toBe(1);
    c.clock.ms = 5_000;
    const fresh = answers.get('q', c.compute);
    await c.finishAt(5_010);
    expect(await fresh).toBe(2);
    expect(c.calls()).toBe(2);
  });

  it('caps the reuse at maxReuseMs and keeps questions apart by key', async () => {
    const c = controlled();
    const answers = sharedAnswers<number>({ now: () => c.clock.ms, slowMs: 250, reuseFactor: 4, maxReuseMs: 30_000 });
    const slow = answers.get('a', c.compute);
    await c.finishAt(20_000); // 4 × 20 s would be 80 s; capped at 30 s
    expect(await slow).toBe(1);
    const other = answers.get('b', c.compute);
    await c.finishAt(20_001);
    expect(await other).toBe(2);
    c.clock.ms = 50_001;
    const after = answers.get('a', c.compute);
    await c.finishAt(50_002);
    expect(await after).toBe(3);
  });

  it('forgets a failed computation at once', async () => {
    const answers = sharedAnswers<number>({ slowMs: 0 });
    await expect(answers.get('q', () => Promise.reject(new Error('database gone')))).rejects.toThrow('database gone');
    await new Promise((resolve) => setImmediate(resolve));
    expect(answers.size).toBe(0);
    expect(await answers.get('q', () => Promise.resolve(7))).toBe(7);
  });

  it('stays within maxEntries', async () => {
    const answers = sharedAnswers<number>({ slowMs: 0, maxEntries: 3 });
    for (let i = 0; i < 10; i += 1) await answers.get(`q${i}`, () => Promise.resolve(i));
    expect(answers.size).toBeLessThanOrEqual(3);
  });
});
