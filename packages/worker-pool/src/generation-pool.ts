import {
  type GenerationJob,
  type GenerationOutput,
  type JobHandle,
  type StepModelInfo,
  type StepReport,
  checkGenerationJob,
} from '@kiln/batching';
import {
  type ChatMessage,
  CPU,
  type GenerationDefaults,
  KilnError,
  KilnErrorCode,
  formatDevice,
  parseDevice,
  type ResponseFormat,
  rollingBatchSettings,
  type RollingBatchSettings,
} from '@kiln/core';
import type { WorkerPoolOptions } from './create-worker-pool.js';
import type { PoolWorker } from './pool-worker.js';
import { planRecipe } from './recipe-plan.js';
import { resolveWorkerPoolSettings } from './settings.js';
import { StepWorker, stepBackend } from './step-worker.js';
import { ThreadBackend } from './thread-backend.js';
import type { ChatTemplateInfo } from './tokenizer-protocol.js';
import { TokenizerThread } from './tokenizer-thread.js';
import type { ModelRecipe } from './worker-protocol.js';
import { type SubmitOptions, WorkerPool, type WorkerPoolInit } from './worker-pool.js';

/** Text generation over every step worker of a pool, summed. */
export interface GenerationStats {
  /** Sequences being decoded. */
  readonly active: number;
  /** Jobs accepted and not yet admitted by a worker. */
  readonly waiting: number;
  readonly cacheTokensUsed: number;
  /** Cache tokens the active sequences may still grow into (prompt + max_new_tokens each). */
  readonly cacheTokensReserved: number;
  readonly cacheBytesUsed: number;
  readonly cacheTokensBudget: number;
  readonly steps: number;
  readonly tokensGenerated: number;
}

/**
 * One step of one step worker: sequences and prompt tokens fed, its round trip `ms` as the
 * rolling loop saw it and `hostMs` on the worker's thread; `ms - hostMs` is messaging.
 */
export type GenerationStep = StepReport;

/**
 * A pool of step workers for text generation (`option.rolling_batch`): jobs are tokenized
 * prompts, each worker's rolling loop admits them from the pool's one queue, and results
 * stream through `JobOptions.onChunk` as GenerationChunk's.
 */
export interface GenerationPool extends WorkerPool<GenerationJob, GenerationOutput> {
  /** Tokenizes a prompt on the pool's prompt-tokenizer thread. */
  encode(prompt: string): Promise<number[]>;
  /**
   * Renders a chat with the model's template and tokenizes it, on the same thread
   * (INVALID_INPUT when the model has no template; see `chatTemplate`).
   */
  encodeChat(messages: readonly ChatMessage[], tools?: readonly unknown[]): Promise<number[]>;
  /**
   * INVALID_INPUT naming why, when a response format cannot be compiled: checked on the
   * prompt-tokenizer thread before a job carrying it is submitted.
   */
  checkResponseFormat(format: ResponseFormat): Promise<void>;
  readonly eosTokenId: number | undefined;
  /** Every token that ends a sequence; each job ends at any of them. */
  readonly eosTokenIds: readonly number[];
  /** The model's generation_config.json defaults, for requests that leave them out. */
  readonly generationDefaults: GenerationDefaults;
  /** The model's chat template (tokenizer_config.json), when it has one. */
  readonly chatTemplate: ChatTemplateInfo | undefined;
  /**
   * Most tokens (prompt + max_new_tokens) one job may hold, known once a worker is ready
   * (0 until then): the model's longest sequence, or a worker's cache budget if smaller.
   */
  readonly limits: { readonly maxSequenceLength: number; readonly maxNewTokensDefault?: number };
  generation(): GenerationStats;
  /** Called after each step of any worker; returns what stops listening. */
  onStep(listener: (step: GenerationStep) => void): () => void;
}

/**
 * Creates a pool of step workers for a recipe whose engine's workers decode step by step
 * (serving.properties' `option.rolling_batch`, see workerKindFor), and starts its minimum of
 * workers. Each worker is a thread of its own holding a copy of the model (placement thread);
 * the pool also starts one thread for tokenizing prompts, ended at shutdown.
 */
export async function createGenerationPool(
  options: WorkerPoolOptions<ModelRecipe, GenerationJob>,
): Promise<GenerationPool> {
  const planned = await planRecipe(options.model, options.onLocated);
  if (planned.kind === 'shared' || planned.workerKind !== 'step') {
    if (planned.kind === 'shared') await planned.model.dispose();
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `the model's workers run ${planned.workerKind}, not step: text generation needs option.rolling_batch on an engine that decodes step by step`,
    );
  }
  const { recipe, sharedHost } = planned;
  const resolved = resolveWorkerPoolSettings(options.settings);
  // A step worker's start loads the model on its thread: the engine's loading timeout bounds it.
  const settings =
    planned.loadTimeoutMs === undefined
      ? resolved
      : { ...resolved, startTimeoutMs: planned.loadTimeoutMs };
  const prompts = await TokenizerThread.start(recipe.load.request.modelDir);
  const rolling = rollingBatchSettings(recipe.load.request.properties);
  const pool = new StepPool(
    {
      name: options.name ?? recipe.load.request.name,
      kind: 'step',
      settings,
      devices: (options.devices ?? [CPU]).map((d) => (typeof d === 'string' ? parseDevice(d) : d)),
      backends: {
        create: ({ label, device, threads, cores }) =>
          stepBackend(
            new ThreadBackend({
              init: {
                kind: 'step',
                recipe,
                device: formatDevice(device),
                threads,
                pinCores: sharedHost ? undefined : cores,
                nice: settings.workerNice,
                rolling,
              },
              label,
              transferInputs: false,
              sharedHost,
            }),
          ),
      },
      clock: options.clock,
      release: () => prompts.close(),
      placement: {
        kind: 'thread',
        reason: 'a step worker keeps its sequences on a thread of its own',
      },
    },
    prompts,
    rolling,
  );
  await pool.start();
  return pool;
}

/** A WorkerPool whose workers are StepWorkers: generation jobs in, GenerationOutput out. */
class StepPool extends WorkerPool<GenerationJob, GenerationOutput> implements GenerationPool {
  private readonly stepListeners = new Set<(step: GenerationStep) => void>();
  private knownModel: StepModelInfo | undefined;

  constructor(
    init: WorkerPoolInit<GenerationJob, GenerationOutput>,
    private readonly prompts: TokenizerThread,
    private readonly rolling: RollingBatchSettings,
  ) {
    super(init);
  }

  get eosTokenId(): number | undefined {
    return this.prompts.eosTokenId;
  }

  get eosTokenIds(): readonly number[] {
    return this.prompts.eosTokenIds;
  }

  get generationDefaults(): GenerationDefaults {
    return this.prompts.generationDefaults;
  }

  get chatTemplate(): ChatTemplateInfo | undefined {
    return this.prompts.chatTemplate;
  }

  encodeChat(messages: readonly ChatMessage[], tools?: readonly unknown[]): Promise<number[]> {
    return this.prompts.encodeChat(messages, tools);
  }

  checkResponseFormat(format: ResponseFormat): Promise<void> {
    return this.prompts.checkResponseFormat(format);
  }

  /** Every job ends at any of the model's end tokens (generation_config.json may list several). */
  override submit(input: GenerationJob, options?: SubmitOptions): JobHandle<GenerationOutput> {
    const ends = this.prompts.eosTokenIds;
    const job =
      ends.length > 1
        ? { ...input, eosTokenIds: [...new Set([...ends, ...(input.eosTokenIds ?? [])])] }
        : input;
    return super.submit(job, options);
  }

  get limits(): { readonly maxSequenceLength: number } {
    return { maxSequenceLength: this.maxTokens() ?? 0 };
  }

  encode(prompt: string): Promise<number[]> {
    return this.prompts.encode(prompt);
  }

  generation(): GenerationStats {
    const totals = {
      active: 0,
      waiting: this.stats().queueDepth,
      cacheTokensUsed: 0,
      cacheTokensReserved: 0,
      cacheBytesUsed: 0,
      cacheTokensBudget: 0,
      steps: 0,
      tokensGenerated: 0,
    };
    for (const worker of this.stepWorkers()) {
      const stats = worker.generationStats();
      if (!stats) continue;
      totals.active += stats.active;
      totals.cacheTokensUsed += stats.cacheTokensUsed;
      totals.cacheTokensReserved += stats.cacheTokensReserved;
      totals.cacheBytesUsed += stats.cacheBytesUsed;
      totals.cacheTokensBudget += stats.cacheTokensBudget;
      totals.steps += stats.steps;
      totals.tokensGenerated += stats.tokensGenerated;
    }
    return totals;
  }

  onStep(listener: (step: GenerationStep) => void): () => void {
    this.stepListeners.add(listener);
    return () => this.stepListeners.delete(listener);
  }

  protected override newWorker(
    ...parts: ConstructorParameters<typeof PoolWorker<GenerationJob, GenerationOutput>>
  ): PoolWorker<GenerationJob, GenerationOutput> {
    return new StepWorker(...parts).configure({
      ...this.rolling,
      onStep: (step) => {
        for (const listener of this.stepListeners) listener(step);
      },
    });
  }

  /** A job that can never run fails at submit (INVALID_INPUT), once a worker told the limits. */
  protected override inputProblem(input: GenerationJob): KilnError | undefined {
    const model = this.model();
    return checkGenerationJob(input, { vocabSize: model?.vocabSize, maxTokens: this.maxTokens() });
  }

  private stepWorkers(): StepWorker[] {
    return this.allWorkers().filter((w): w is StepWorker => w instanceof StepWorker);
  }

  /** The model as the first ready worker reported it; kept when workers come and go. */
  private model(): StepModelInfo | undefined {
    for (const worker of this.allWorkers()) this.knownModel ??= worker.facts?.step;
    return this.knownModel;
  }

  /** The model's longest sequence, or a worker's cache budget when it holds fewer tokens. */
  private maxTokens(): number | undefined {
    const model = this.model();
    const bytes = this.rolling.maxKvCacheBytes;
    if (!model) return undefined;
    if (bytes === undefined) return model.maxSequenceLength;
    return Math.min(model.maxSequenceLength, Math.floor(bytes / model.cacheBytesPerToken));
  }
}
