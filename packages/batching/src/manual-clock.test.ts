import { describe, expect, it } from 'vitest';
import { ManualClock } from './manual-clock.js';

describe('ManualClock', () => {
  it('fires due timers in time order, at their due time, including ones scheduled meanwhile', () => {
    const clock = new ManualClock(100);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => {
      fired.push(`a@${clock.now()}`);
      clock.setTimeout(() => fired.push(`c@${clock.now()}`), 5);
    }, 10);
    const cleared = clock.setTimeout(() => fired.push('never'), 15);
    clock.clearTimeout(cleared);
    expect(clock.pending).toBe(2);
    expect(clock.nextDue()).toBe(110);
    clock.advance(30);
    expect(fired).toEqual(['a@110', 'c@115', 'b@120']);
    expect(clock.now()).toBe(130);
    expect(clock.pending).toBe(0);
    expect(clock.nextDue()).toBeUndefined();
  });

  it('fires timers with equal due times in the order they were set', () => {
    const clock = new ManualClock();
    const fired: number[] = [];
    for (let i = 0; i < 50; i++) clock.setTimeout(() => fired.push(i), 7);
    clock.advance(7);
    expect(fired).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });
});
