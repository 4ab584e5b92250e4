import {
  CPU,
  KilnError,
  KilnErrorCode,
  type ModelInspection,
  type ServingProperties,
  type StepDecoder,
} from '@kiln/core';
import { RollingScheduler } from '@kiln/batching';
import { startInferenceThread } from '@kiln/worker-pool';
import type * as OrtEngine from '@kiln/engine-onnxruntime';
import { importEnginePackage } from '../models/engine-catalog.js';
import type { GenerationMetrics } from './generation-metrics.js';
import type { ModelTokenizers } from './streaming-tokenizer.js';
import { TokenizerThread } from './tokenizer-thread.js';

/** What the server needs of a decoder: steps for the scheduler, its sizes, and closing. */
export interface GenerativeDecoder extends StepDecoder<unknown> {
  readonly vocabSize: number;
  readonly cacheBytesPerToken: number;
  close(): Promise<void>;
}

/** The part of @kiln/engine-onnxruntime text generation uses; imported only when needed. */
type OrtDecoderModule = Pick<typeof OrtEngine, 'OrtStepDecoder' | 'parseSessionConfig'>;

/** DJL LMI's `option.rolling_batch` values that turn rolling batching on. */
const ROLLING_BATCH_ON = new Set(['auto', 'scheduler']);

/** True when serving.properties asks for text generation with rolling batching. */
export function wantsRollingBatch(properties: ServingProperties): boolean {
  // Read as the settings check reads it (model-settings), so that what passes it is in force.
  return ROLLING_BATCH_ON.has(properties.options.rolling_batch?.trim().toLowerCase() ?? '');
}

/**
 * A text-generation model: its decoder (ONNX Runtime, on a worker thread), its tokenizer
 * (on two threads of its own, see ModelTokenizers) and the rolling-batch scheduler that
 * serves it. Settings from serving.properties:
 * `option.max_rolling_batch_size` (32), `option.max_rolling_batch_prefill_tokens` (4096),
 * `option.max_kv_cache_bytes` (cache budget; default batch size × longest sequence).
 */
export class GenerativeModel {
  private constructor(
    readonly name: string,
    readonly decoder: GenerativeDecoder,
    readonly tokenizers: ModelTokenizers,
    readonly scheduler: RollingScheduler<unknown>,
  ) {}

  static async load(
    name: string,
    inspection: ModelInspection,
    metrics: GenerationMetrics,
  ): Promise<GenerativeModel> {
    const engine = inspection.engineName ?? 'OnnxRuntime';
    if (engine !== 'OnnxRuntime')
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `option.rolling_batch needs the OnnxRuntime engine, not ${engine}`,
      );
    const option = (key: string): number | undefined => {
      const raw = optionValue(inspection.properties, key);
      if (raw === undefined) return undefined;
      const value = Number(raw);
      if (!Number.isInteger(value) || value < 1)
        throw new KilnError(KilnErrorCode.InvalidConfig, `option.${key} must be an integer >= 1`);
      return value;
    };
    // tokenizer.json, GPT-2's vocab.json + merges.txt, or a character vocab.json.
    const tokenizers = await startTokenizers(inspection.dir);
    let decoder: GenerativeDecoder;
    try {
      // An optional peer: a server installed with other engines only must still start.
      const { OrtStepDecoder, parseSessionConfig } = await importEnginePackage<OrtDecoderModule>(
        '@kiln/engine-onnxruntime',
      );
      // ONNX Runtime's own option.* keys (intraOpNumThreads, optLevel, …) apply as usual.
      decoder = await OrtStepDecoder.load(inspection.dir, {
        startThread: startInferenceThread,
        session: parseSessionConfig(inspection.properties.options, CPU),
      });
    } catch (error) {
      await closeTokenizers(tokenizers);
      throw error;
    }
    const tokenizer = tokenizers.prompts;
    try {
      // Exported models may pad their logits past the vocabulary (GPT-2's 50257 to 50304).
      if (tokenizer.vocabSize > decoder.vocabSize)
        throw new KilnError(
          KilnErrorCode.ModelLoadFailed,
          `the tokenizer has ${tokenizer.vocabSize} tokens but the model's logits only ${decoder.vocabSize}`,
        );
      const cacheBytes = option('max_kv_cache_bytes');
      const scheduler = new RollingScheduler(decoder, {
        ...optional('maxBatchSize', option('max_rolling_batch_size')),
        ...optional('maxPrefillTokens', option('max_rolling_batch_prefill_tokens')),
        ...optional(
          'maxCacheTokens',
          cacheBytes && Math.max(1, Math.floor(cacheBytes / decoder.cacheBytesPerToken)),
        ),
      });
      const model = new GenerativeModel(name, decoder, tokenizers, scheduler);
      metrics.watch(model);
      return model;
    } catch (error) {
      await Promise.all([decoder.close(), closeTokenizers(tokenizers)]);
      throw error;
    }
  }

  /** Lets accepted requests finish (up to `timeoutMs`), then fails the rest and stops. */
  async close(timeoutMs = 0): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.scheduler.whenIdle(),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
    this.scheduler.close();
    await Promise.all([this.decoder.close(), closeTokenizers(this.tokenizers)]);
  }
}

/** Both tokenizer threads; one that fails to start ends the other. */
async function startTokenizers(dir: string): Promise<ModelTokenizers> {
  const [prompts, outputs] = await Promise.allSettled([
    TokenizerThread.start(dir, startInferenceThread),
    TokenizerThread.start(dir, startInferenceThread),
  ]);
  if (prompts.status === 'fulfilled' && outputs.status === 'fulfilled')
    return { prompts: prompts.value, outputs: outputs.value };
  for (const started of [prompts, outputs])
    if (started.status === 'fulfilled') await started.value.close();
  throw prompts.status === 'rejected' ? prompts.reason : (outputs as PromiseRejectedResult).reason;
}

async function closeTokenizers(tokenizers: ModelTokenizers): Promise<void> {
  await Promise.all([tokenizers.prompts.close(), tokenizers.outputs.close()]);
}

function optionValue(properties: ServingProperties, key: string): string | undefined {
  return properties.options[key];
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;
}
