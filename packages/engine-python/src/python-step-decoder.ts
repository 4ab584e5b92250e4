import { KilnError, KilnErrorCode, type StepDecoder, type StepEntry } from '@kiln/core';
import type { Frame } from './frames.js';
import { PythonWorker, type PythonWorkerOptions } from './python-worker.js';

/** Keys shared with python/kiln_python/rolling.py. */
const STEP_INIT_KEY = 'kiln_step_handler';
const STEP_KEY = 'kiln_step';
const DESCRIBE_KEY = 'kiln_step_describe';

/** What the handler's object says of its model (its attributes of the same names). */
interface HandlerInfo {
  readonly vocab_size: number;
  readonly max_sequence_length: number;
  readonly eos_token_id?: number;
  readonly cache_bytes_per_token?: number;
}

/**
 * A Python step handler (option.rolling_batch) as a StepDecoder: one Python process holding
 * the object model.py's handler made, stepped with token ids; each step answers a row of
 * logits per entry, which the SequenceStepper beside it samples. Sequences opened and released
 * between steps travel with the next step, so a step is one round trip; releases that no step
 * takes along (the last sequences ended) go on their own, so the handler frees their state.
 */
export class PythonStepDecoder implements StepDecoder<number> {
  readonly vocabSize: number;
  readonly maxSequenceLength: number;
  readonly cacheBytesPerToken: number;
  readonly eosTokenId: number | undefined;
  private nextId = 1;
  private opens: number[] = [];
  private releases: number[] = [];
  private closed = false;
  private flushPending = false;

  private constructor(
    private readonly worker: PythonWorker,
    info: HandlerInfo,
    private readonly onClose: () => void,
  ) {
    this.vocabSize = info.vocab_size;
    this.maxSequenceLength = info.max_sequence_length;
    // Without the handler's figure, the cache is counted in tokens.
    this.cacheBytesPerToken = Math.max(1, info.cache_bytes_per_token ?? 1);
    this.eosTokenId = info.eos_token_id;
  }

  /**
   * Starts the Python process, which imports model.py and calls its handler with the model's
   * properties (the init call, within the start's timeout), then asks what the object holds.
   */
  static async start(
    options: PythonWorkerOptions,
    onClose: () => void,
    signal?: AbortSignal,
  ): Promise<PythonStepDecoder> {
    const worker = await PythonWorker.start(
      { ...options, initProperties: { ...options.initProperties, [STEP_INIT_KEY]: 'true' } },
      signal,
    );
    try {
      const described = await worker.call({ [DESCRIBE_KEY]: true }, []);
      return new PythonStepDecoder(worker, described.properties as unknown as HandlerInfo, onClose);
    } catch (error) {
      await worker.close();
      const reason = error instanceof Error ? error.message : String(error);
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `the step handler of ${options.modelName} failed to load: ${reason}`,
        { cause: error },
      );
    }
  }

  open(): number {
    const id = this.nextId++;
    this.opens.push(id);
    return id;
  }

  async step(entries: readonly StepEntry<number>[]): Promise<readonly Float32Array[]> {
    if (this.closed) throw new KilnError(KilnErrorCode.Closed, 'the step handler is closed');
    const step = {
      opens: this.opens.splice(0),
      feeds: entries.map(({ state, tokens }) => [state, tokens]),
      releases: this.releases.splice(0),
    };
    const answer = await this.worker.call({ [STEP_KEY]: step }, []);
    return this.rowsOf(answer, entries.length);
  }

  /** Frees a sequence with the next step (one never sent to the handler is just dropped). */
  release(state: number): void {
    const unsent = this.opens.indexOf(state);
    if (unsent >= 0) this.opens.splice(unsent, 1);
    else {
      this.releases.push(state);
      this.flushSoon();
    }
  }

  /** Sends the releases a step of this turn did not take along, in a step of no feeds. */
  private flushSoon(): void {
    if (this.flushPending) return;
    this.flushPending = true;
    setImmediate(() => {
      this.flushPending = false;
      if (this.releases.length === 0 || this.closed) return;
      // A failure is the worker's: its next step, or its death, says so.
      this.step([]).catch(() => undefined);
    });
  }

  onLost(listener: (error: KilnError) => void): void {
    void this.worker.died.then(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    await this.worker.close();
  }

  /** The answer's float32 [entries, vocab] logits, a view of each row. */
  private rowsOf(answer: Frame, entries: number): Float32Array[] {
    if (entries === 0) return [];
    const logits = answer.contents.find((c) => c.name === 'logits');
    const [rows, vocab] = logits?.shape ?? [];
    if (!logits || logits.dtype !== 'float32' || rows !== entries || vocab !== this.vocabSize)
      throw new KilnError(
        KilnErrorCode.EngineError,
        `the step handler answered logits of shape [${logits?.shape?.join(', ') ?? ''}], not [${entries}, ${this.vocabSize}]`,
      );
    let { bytes } = logits;
    // Tensor data arrives 8-byte aligned in its frame; a copy only if it ever is not.
    if (bytes.byteOffset % 4 !== 0) bytes = bytes.slice();
    return Array.from(
      { length: entries },
      (_, i) => new Float32Array(bytes.buffer, bytes.byteOffset + i * vocab * 4, vocab),
    );
  }
}
