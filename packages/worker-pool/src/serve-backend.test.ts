import {
  CPU,
  KilnError,
  KilnErrorCode,
  type Model,
  type PredictResult,
  type ServingChunk,
  type ServingChunkSink,
  type ServingContext,
  type ServingInput,
  type ServingOutput,
  servingPropertiesFrom,
} from '@kiln/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import type { WorkerPool } from './worker-pool.js';

/**
 * A model whose workers serve requests (as Python mode's do): each context answers a body's
 * text back; a body `die` kills the context under its call, as a process that exits.
 */
class ServingModel implements Model {
  readonly name = 'serving';
  readonly engine = 'Serving';
  readonly device = CPU;
  readonly modelDir = '/nonexistent';
  readonly inputs = [];
  readonly outputs = [];
  readonly properties = servingPropertiesFrom({});
  contexts = 0;
  /** Batch sizes served, in order. */
  readonly batches: number[] = [];
  /** What the last start was told when the pool gave up on it. */
  startAbandoned = false;

  constructor(
    readonly contextStartTimeoutMs?: number,
    private readonly hangStart = false,
  ) {}

  describe(): Record<string, unknown> {
    return {};
  }

  newExecutionContext(): Promise<never> {
    return Promise.reject(new Error('a serving model has no execution context'));
  }

  async newServingContext(options: { signal?: AbortSignal } = {}): Promise<ServingContext> {
    if (this.hangStart) {
      await new Promise<never>((_, reject) =>
        options.signal?.addEventListener('abort', () => {
          this.startAbandoned = true;
          reject(new Error('abandoned'));
        }),
      );
    }
    this.contexts++;
    const listeners: ((error: KilnError) => void)[] = [];
    return {
      serve: async (
        inputs: readonly ServingInput[],
        options: { onChunk?: readonly (ServingChunkSink | undefined)[] } = {},
      ): Promise<PredictResult<ServingOutput>[]> => {
        this.batches.push(inputs.length);
        await new Promise((resolve) => setTimeout(resolve, 5));
        const texts = inputs.map((input) => new TextDecoder().decode(input.body));
        if (texts.includes('die')) {
          const error = new KilnError(KilnErrorCode.WorkerCrashed, 'the process exited');
          for (const listener of listeners) listener(error);
          throw error;
        }
        const results: PredictResult<ServingOutput>[] = [];
        for (const [i, text] of texts.entries()) {
          const sink = options.onChunk?.[i];
          if (text !== 'stream' || !sink) {
            results.push({ ok: true, value: { type: 'json', value: text } });
            continue;
          }
          // A body `stream` answers in three pieces, each once the last is taken.
          for (const piece of [0, 1, 2]) await sink({ body: new TextEncoder().encode(`${piece}`) });
          results.push({ ok: true, value: { type: 'streamed' } });
        }
        return results;
      },
      onDeath: (listener) => listeners.push(listener),
      close: () => Promise.resolve(),
    };
  }

  dispose(): Promise<void> {
    return Promise.resolve();
  }
}

const pools: WorkerPool<ServingInput, ServingOutput>[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.shutdown({ timeoutMs: 2000 })));
});

async function servePool(model: ServingModel, settings = {}) {
  const pool = await createWorkerPool<ServingInput, ServingOutput>({
    model: { shared: model, translator: null as never },
    settings: { minWorkers: 1, maxWorkers: 1, ...settings },
  });
  pools.push(pool);
  return pool;
}

const ask = (pool: WorkerPool<ServingInput, ServingOutput>, text: string) =>
  pool.submit({ body: new TextEncoder().encode(text) }).result.then(
    (output) => (output as { value: unknown }).value,
    (error: KilnError) => error.code,
  );

describe('serve workers', () => {
  it('hand requests to the model’s serving context as they are, in batches', async () => {
    const model = new ServingModel();
    const pool = await servePool(model, { batchSize: 4, maxBatchDelayMs: 50 });
    expect(await Promise.all(['a', 'b', 'c'].map((text) => ask(pool, text)))).toEqual([
      'a',
      'b',
      'c',
    ]);
    expect(model.batches).toContain(3);
  });

  it("hand each job's onChunk to the serving context, which streams its answer through it", async () => {
    const model = new ServingModel();
    const pool = await servePool(model, { batchSize: 4, maxBatchDelayMs: 50 });
    const pieces: string[] = [];
    const streamed = pool.submit(
      { body: new TextEncoder().encode('stream') },
      {
        onChunk: async (chunk) => {
          pieces.push(new TextDecoder().decode((chunk as ServingChunk).body));
          await new Promise((resolve) => setTimeout(resolve, 5));
        },
      },
    ).result;
    const [plain, answer] = await Promise.all([ask(pool, 'plain'), streamed]);
    expect(answer).toEqual({ type: 'streamed' });
    expect(pieces).toEqual(['0', '1', '2']);
    expect(plain).toBe('plain');
  });

  it('die with their context; the pool replaces them, and the innocents of a batch are answered', async () => {
    const model = new ServingModel();
    const pool = await servePool(model, { batchSize: 4, maxBatchDelayMs: 50 });
    const answers = await Promise.all(['a', 'die', 'c'].map((text) => ask(pool, text)));
    expect(answers).toEqual(['a', KilnErrorCode.WorkerCrashed, 'c']);
    expect(model.contexts).toBeGreaterThanOrEqual(2);
    expect(await ask(pool, 'after')).toBe('after');
  });

  it("start within the model's own start timeout, and a start the pool abandons is told so", async () => {
    const model = new ServingModel(100, true);
    await expect(servePool(model)).rejects.toThrow(/not ready after 100 ms/);
    expect(model.startAbandoned).toBe(true);
  });
});
