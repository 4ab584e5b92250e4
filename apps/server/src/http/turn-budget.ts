import type { Middleware } from 'koa';

/**
 * Bounds the request work one event-loop turn does. Under load every readable socket is handled
 * in the same turn: 64 connections at ~200 µs of main-thread work each hold the loop — a health
 * probe, a timer, the next read — for 10 ms and more. Work that asks once the turn has spent
 * `budgetMs` waits for a later turn, in the order it asked, so the loop comes round about every
 * `budgetMs` plus the parsing of what arrived meanwhile. Nothing waits while a turn has time:
 * an idle or lightly loaded server pays one clock read per ask.
 */
export class TurnBudget {
  /** performance.now() when this turn's first piece of work started; -1 between turns. */
  private turnStart = -1;

  constructor(readonly budgetMs: number) {}

  /**
   * Undefined when the current turn still has time (go on at once); otherwise a promise that
   * resolves in a later turn that has.
   */
  turn(): Promise<void> | undefined {
    if (this.hasTime()) return undefined;
    return new Promise((resolve) => setImmediate(() => this.whenTime(resolve)));
  }

  // Each waiter is its own immediate: Node settles the microtasks of one (the request's work)
  // before it runs the next, so each finds the time the ones before it took.
  private whenTime(resolve: () => void): void {
    if (this.hasTime()) resolve();
    else setImmediate(() => this.whenTime(resolve));
  }

  private hasTime(): boolean {
    const now = performance.now();
    if (this.turnStart < 0) {
      this.turnStart = now;
      // Runs in this turn's check phase, ahead of the waiters queued after it: they start
      // the next turn's time.
      setImmediate(this.endTurn);
      return true;
    }
    return now - this.turnStart < this.budgetMs;
  }

  private readonly endTurn = (): void => {
    this.turnStart = -1;
  };
}

/**
 * Koa's side of the budget: a request waits for a turn with time before its route runs and
 * again before its answer is written. Requests `exempt` says so of (health checks) never wait.
 */
export function turnBudgetMiddleware(
  budget: TurnBudget,
  exempt: (path: string) => boolean,
): Middleware {
  return async (ctx, next) => {
    if (exempt(ctx.path)) return next();
    const before = budget.turn();
    if (before) await before;
    await next();
    const after = budget.turn();
    if (after) await after;
  };
}
