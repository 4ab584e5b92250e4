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
  /** Work waiting for a turn with time, first come first served. */
  private readonly waiting: (() => void)[] = [];
  private next = 0;
  private drainScheduled = false;

  constructor(readonly budgetMs: number) {}

  /**
   * Undefined when the current turn still has time and nothing waits (go on at once);
   * otherwise a promise that resolves, after the work that asked before, in a turn with time.
   */
  turn(): Promise<void> | undefined {
    if (this.next === this.waiting.length && this.hasTime()) return undefined;
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.scheduleDrain();
    });
  }

  private scheduleDrain(): void {
    if (this.drainScheduled) return;
    this.drainScheduled = true;
    setImmediate(this.drain);
  }

  // Lets one waiter go, then looks again once its work so far has run: the check is a
  // microtask queued behind that work, so each look sees the time the ones before took.
  private readonly drain = (): void => {
    this.drainScheduled = false;
    if (this.next === this.waiting.length) return;
    if (!this.hasTime()) {
      this.scheduleDrain();
      return;
    }
    const resolve = this.waiting[this.next++]!;
    if (this.next === this.waiting.length) {
      this.waiting.length = 0;
      this.next = 0;
    } else if (this.next >= 1024 && this.next * 2 >= this.waiting.length) {
      // A backlog that never empties (sustained overload) must not keep every slot it used.
      this.waiting.splice(0, this.next);
      this.next = 0;
    }
    resolve();
    this.drainScheduled = true;
    queueMicrotask(this.drain);
  };

  private hasTime(): boolean {
    const now = performance.now();
    if (this.turnStart < 0) {
      this.turnStart = now;
      // Runs in this turn's check phase, ahead of a drain queued after it: the drain then
      // starts the next turn's time.
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
