import {
  CPU,
  type ExecutionContext,
  type ExecutionContextOptions,
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type Model,
  NDList,
  type ServingProperties,
  StackBatchifier,
  Tensor,
  type Translator,
  servingPropertiesFrom,
} from '@kiln/core';

/**
 * A model for timing tests on the main thread: `y = 2x` over float32 rows, where every
 * forward waits until the test opens it (`release`), so a test decides exactly when work
 * finishes. Inputs are plain number arrays (one row each).
 */
export class GatedModel implements Model {
  readonly name = 'gated';
  readonly engine = 'Gated';
  readonly device = CPU;
  readonly modelDir = '/nonexistent';
  readonly inputs = [{ name: 'x', dtype: 'float32' as const, shape: [-1, -1] }];
  readonly outputs = [{ name: 'y', dtype: 'float32' as const, shape: [-1, -1] }];
  readonly properties: ServingProperties;
  /** Rows per forward, in order. */
  readonly forwards: number[] = [];
  /** intraOpThreads asked of each context. */
  readonly contextThreads: (number | undefined)[] = [];
  /** Open: forwards run at once. Closed: they wait for release(). */
  open = false;
  /** The next forwards fail as if the engine's own thread died. */
  crashNext = 0;
  /** newExecutionContext fails while set. */
  refuseContexts: string | undefined;
  private waiting: (() => void)[] = [];

  /** `properties`: serving.properties keys, e.g. `option.intraOpNumThreads`. */
  constructor(properties: Record<string, string> = {}) {
    this.properties = servingPropertiesFrom(properties);
  }

  describe(): Record<string, unknown> {
    return { gated: true };
  }

  async newExecutionContext(options: ExecutionContextOptions = {}): Promise<ExecutionContext> {
    if (this.refuseContexts) throw new KilnError(KilnErrorCode.EngineError, this.refuseContexts);
    this.contextThreads.push(options.intraOpThreads);
    return {
      forward: (input, opts) => this.forward(input, opts),
      close: async () => {},
    };
  }

  async dispose(): Promise<void> {}

  /** Forwards waiting for release. */
  get pending(): number {
    return this.waiting.length;
  }

  /** Lets the oldest waiting forward (or all of them) finish. */
  release(all = false): void {
    const ready = all ? this.waiting.splice(0) : this.waiting.splice(0, 1);
    for (const go of ready) go();
  }

  private async forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    const x = input.get(0);
    this.forwards.push(x.shape[0]!);
    if (!this.open) {
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        options.signal?.addEventListener(
          'abort',
          () => {
            const index = this.waiting.indexOf(resolve);
            if (index >= 0) this.waiting.splice(index, 1);
            resolve();
          },
          { once: true },
        );
      });
    }
    if (this.crashNext > 0) {
      this.crashNext--;
      throw new KilnError(KilnErrorCode.WorkerCrashed, 'gated engine thread died');
    }
    const data = x.data as Float32Array;
    return NDList.of(
      new Tensor(
        'float32',
        data.map((v) => v * 2),
        x.shape,
        'y',
      ),
    );
  }
}

/** Rows of numbers in, rows out; rows of one length batch together. */
export class RowTranslator implements Translator<number[], number[]> {
  readonly batchifier = new StackBatchifier();

  processInput(_ctx: unknown, input: number[]): NDList {
    if (input.length === 0) throw new KilnError(KilnErrorCode.InvalidInput, 'empty row');
    return NDList.of(new Tensor('float32', Float32Array.from(input), [1, input.length], 'x'));
  }

  processOutput(_ctx: unknown, output: NDList): number[] {
    return Array.from(output.get(0).data as Float32Array);
  }
}
