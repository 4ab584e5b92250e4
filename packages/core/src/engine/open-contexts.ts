import { KilnError, KilnErrorCode } from '../errors.js';
import type { ExecutionContext } from './execution.js';

/**
 * The execution contexts a model has handed out that have not closed yet. A Model keeps one
 * so that dispose() closes what predictors still hold, and so that a context finished while
 * the model was being disposed cannot outlive it.
 */
export class OpenContexts<C extends Pick<ExecutionContext, 'close'>> {
  private readonly open = new Set<C>();
  private isClosed = false;

  /** `modelName` names the model in the error given once it is disposed. */
  constructor(private readonly modelName: string) {}

  /** Contexts tracked and not released yet. */
  get size(): number {
    return this.open.size;
  }

  /** Whether closeAll() was called: no further context is accepted. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** Throws CLOSED once closeAll() was called. */
  assertOpen(): void {
    if (this.isClosed) {
      throw new KilnError(KilnErrorCode.Closed, `model ${this.modelName} is disposed`);
    }
  }

  /**
   * Tracks a new context and returns it. Engines await native loads while making a context,
   * so the model may have been disposed meanwhile: then the context is closed and CLOSED thrown.
   */
  async track(context: C): Promise<C> {
    if (this.isClosed) {
      await closeContext(context).catch(() => undefined);
      this.assertOpen();
    }
    this.open.add(context);
    return context;
  }

  /** Forgets a context; contexts call this when they close. */
  release(context: C): void {
    this.open.delete(context);
  }

  /**
   * Refuses further contexts, then closes every tracked one and settles `extra` (the spare
   * sessions or handles a model holds). One failing close does not keep the others open, and
   * failures are dropped: a disposing model has no one left to report them to.
   */
  async closeAll(...extra: (Promise<unknown> | undefined)[]): Promise<void> {
    this.isClosed = true;
    const contexts = [...this.open];
    this.open.clear();
    await Promise.allSettled([...contexts.map(closeContext), ...extra]);
  }
}

/** Turns a close() that throws synchronously into a rejection. */
async function closeContext(context: Pick<ExecutionContext, 'close'>): Promise<void> {
  await context.close();
}
