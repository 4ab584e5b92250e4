import {
  KilnError,
  KilnErrorCode,
  type SamplingParams,
  type SequenceSettings,
  type StepDecoder,
  type StepEntry,
  type StepOutput,
} from '@kiln/core';
import type { Content, Frame } from './frames.js';
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
 * the object model.py's handler made, stepped with token ids; each step answers, per entry,
 * the token the handler chose or a row of logits that the SequenceStepper beside it samples
 * (only the handler's answer crosses the process boundary). Sequences opened and released
 * between steps travel with the next step, so a step is one round trip; releases that no step
 * takes along (the last sequences ended) go on their own, so the handler frees their state.
 */
export class PythonStepDecoder implements StepDecoder<number> {
  readonly vocabSize: number;
  readonly maxSequenceLength: number;
  readonly cacheBytesPerToken: number;
  readonly eosTokenId: number | undefined;
  private nextId = 1;
  /** Sequences opened since the last step, with their parameters as DJL names them. */
  private opens: [number, Record<string, number | boolean>][] = [];
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

  open(sequence: SequenceSettings = {}): number {
    const id = this.nextId++;
    this.opens.push([id, djlParameters(sequence.sampling ?? {})]);
    return id;
  }

  async step(entries: readonly StepEntry<number>[]): Promise<readonly StepOutput[]> {
    if (this.closed) throw new KilnError(KilnErrorCode.Closed, 'the step handler is closed');
    const step = {
      opens: this.opens.splice(0),
      feeds: entries.map(({ state, tokens }) => [state, tokens]),
      releases: this.releases.splice(0),
    };
    const answer = await this.worker.call({ [STEP_KEY]: step }, []);
    return this.outputsOf(answer, entries.length);
  }

  /** Frees a sequence with the next step (one never sent to the handler is just dropped). */
  release(state: number): void {
    const unsent = this.opens.findIndex(([id]) => id === state);
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

  /**
   * Each entry's output: `tokens` (int32, one per entry: the handler's choice, -1 where it gave
   * logits) and `logits` (float32, a row per entry without a token), either one alone when the
   * handler answered only tokens or only logits.
   */
  private outputsOf(answer: Frame, entries: number): StepOutput[] {
    if (entries === 0) return [];
    const tokens = answer.contents.find((c) => c.name === 'tokens');
    const logits = answer.contents.find((c) => c.name === 'logits');
    const chosen =
      tokens?.dtype === 'int32' && tokens.shape?.[0] === entries
        ? new Int32Array(tokens.bytes.slice().buffer)
        : new Int32Array(entries).fill(-1);
    const wanted = chosen.filter((t) => t < 0).length;
    const rows = wanted === 0 ? [] : this.rowsOf(logits, wanted);
    let row = 0;
    return Array.from(chosen, (token) => {
      if (token < 0) return rows[row++]!;
      if (token >= this.vocabSize)
        throw new KilnError(
          KilnErrorCode.EngineError,
          `the step handler chose token ${token}, outside its vocabulary of ${this.vocabSize}`,
        );
      return token;
    });
  }

  /** float32 [count, vocab] logits, a view of each row. */
  private rowsOf(logits: Content | undefined, count: number): Float32Array[] {
    const [rows, vocab] = logits?.shape ?? [];
    if (!logits || logits.dtype !== 'float32' || rows !== count || vocab !== this.vocabSize)
      throw new KilnError(
        KilnErrorCode.EngineError,
        `the step handler answered logits of shape [${logits?.shape?.join(', ') ?? ''}], not [${count}, ${this.vocabSize}]`,
      );
    let { bytes } = logits;
    // Tensor data arrives 8-byte aligned in its frame; a copy only if it ever is not.
    if (bytes.byteOffset % 4 !== 0) bytes = bytes.slice();
    return Array.from(
      { length: count },
      (_, i) => new Float32Array(bytes.buffer, bytes.byteOffset + i * vocab * 4, vocab),
    );
  }
}

/** Sampling parameters under DJL's names, as a handler reads them; those unset are left out. */
function djlParameters(sampling: SamplingParams): Record<string, number | boolean> {
  const names: [keyof SamplingParams, string][] = [
    ['doSample', 'do_sample'],
    ['temperature', 'temperature'],
    ['topK', 'top_k'],
    ['topP', 'top_p'],
    ['repetitionPenalty', 'repetition_penalty'],
    ['seed', 'seed'],
  ];
  const parameters: Record<string, number | boolean> = {};
  for (const [key, name] of names) {
    const value = sampling[key];
    if (value !== undefined) parameters[name] = value;
  }
  return parameters;
}
