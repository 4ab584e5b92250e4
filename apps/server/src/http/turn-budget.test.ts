import { describe, expect, it } from 'vitest';
import { TurnBudget } from './turn-budget.js';

/** Keeps the thread busy for `ms`, as a request's work does. */
function burn(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/**
 * Starts `count` pieces of work in one turn, each burning `workMs` once the budget lets it
 * run; resolves with the loop turn each ran in and their order. A chain of immediates counts
 * the turns.
 */
async function runAll(budget: TurnBudget | undefined, count: number, workMs: number) {
  let turn = 0;
  let counting = true;
  const tick = () => {
    turn++;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  const turns: number[] = [];
  const order: number[] = [];
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const wait = budget?.turn();
      if (wait) await wait;
      order.push(i);
      turns.push(turn);
      burn(workMs);
    }),
  );
  counting = false;
  return { turns, order };
}

describe('TurnBudget', () => {
  it('lets work run at once while the turn has time', async () => {
    const { turns } = await runAll(new TurnBudget(1000), 10, 0.1);
    expect(new Set(turns).size).toBe(1);
  });

  it('spreads work past the budget over later turns, in the order it asked', async () => {
    const { turns, order } = await runAll(new TurnBudget(2), 20, 0.5);
    expect(order).toEqual(Array.from({ length: 20 }, (_, i) => i));
    // 10 ms of work at most ~2 ms a turn (a piece may overrun it): at least 4 turns.
    expect(new Set(turns).size).toBeGreaterThanOrEqual(4);
    for (const t of new Set(turns)) {
      // Each turn ran at most what fits in 2 ms plus the piece that crossed it.
      expect(turns.filter((x) => x === t).length).toBeLessThanOrEqual(5);
    }
    // Without a budget the same work takes one turn: the loop waits for all of it.
    const unbounded = await runAll(undefined, 20, 0.5);
    expect(new Set(unbounded.turns).size).toBe(1);
  });

  it('lets a timer run between the turns of a long backlog', async () => {
    const budget = new TurnBudget(2);
    let timerFiredAfter = -1;
    let done = 0;
    setTimeout(() => (timerFiredAfter = done), 1);
    await Promise.all(
      Array.from({ length: 100 }, async () => {
        const wait = budget.turn();
        if (wait) await wait;
        burn(0.5);
        done++;
      }),
    );
    // 50 ms of work: the 1 ms timer fires long before the last piece.
    expect(timerFiredAfter).toBeGreaterThanOrEqual(0);
    expect(timerFiredAfter).toBeLessThan(40);
  });
});
