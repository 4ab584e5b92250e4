import type { GenerationJob, GenerationOutput } from '@kiln/batching';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { WorkerPoolOptions } from './create-worker-pool.js';
import type { ModelRecipe } from './worker-protocol.js';
import type { WorkerPool } from './worker-pool.js';

/** Text generation over every step worker of a pool, summed. */
export interface GenerationStats {
  /** Sequences being decoded. */
  readonly active: number;
  /** Jobs accepted and not yet admitted by a worker. */
  readonly waiting: number;
  readonly cacheTokensUsed: number;
  readonly cacheBytesUsed: number;
  readonly cacheTokensBudget: number;
  readonly steps: number;
  readonly tokensGenerated: number;
}

/** One step of one step worker: what it fed, and where its time went. */
export interface GenerationStep {
  readonly sequences: number;
  readonly prefillTokens: number;
  /** The step's round trip, as the rolling loop on the main thread saw it. */
  readonly ms: number;
  /** The step on the worker's thread (decoder, sampling, detokenizing). */
  readonly hostMs: number;
}

/**
 * A pool of step workers for text generation (`option.rolling_batch`): jobs are tokenized
 * prompts, each worker's rolling loop admits them from the pool's one queue, and results
 * stream through `JobOptions.onChunk` as GenerationChunk's.
 */
export interface GenerationPool extends WorkerPool<GenerationJob, GenerationOutput> {
  /** Tokenizes a prompt on the pool's prompt-tokenizer thread. */
  encode(prompt: string): Promise<number[]>;
  readonly eosTokenId: number | undefined;
  /** The model's limits, known once a worker is ready (maxSequenceLength 0 until then). */
  readonly limits: { readonly maxSequenceLength: number; readonly maxNewTokensDefault?: number };
  generation(): GenerationStats;
  /** Called after each step of any worker; returns what stops listening. */
  onStep(listener: (step: GenerationStep) => void): () => void;
}

/** Creates a pool of step workers for a recipe whose engine's workers step (see workerKindFor). */
export function createGenerationPool(
  options: WorkerPoolOptions<ModelRecipe, GenerationJob>,
): Promise<GenerationPool> {
  void options;
  return Promise.reject(
    new KilnError(KilnErrorCode.Internal, 'createGenerationPool is not implemented yet'),
  );
}
