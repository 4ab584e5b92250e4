import { createHash } from 'node:crypto';
import { realpath, stat } from 'node:fs/promises';
import { cpus } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { type SharedFileAddon, loadSharedFileAddon } from '@kiln/shared-file-native';
import type { InferenceSession } from 'onnxruntime-node';
import {
  type OptimizedModelKey,
  discardCacheEntry,
  messageOf,
  optimizedModelFile,
  withSessionEntries,
} from './optimized-model-cache.js';
import type { OrtSessionConfig } from './options.js';
import type { OrtModule } from './ort-loader.js';

/** How often a thread waiting for another's optimized model looks for it. */
const CLAIM_POLL_MS = 5;

/**
 * Where a session's weights live: one mapping shared by the process, or its own copy. The
 * session that mapped them says how the optimized model was found (`cache`).
 */
export type WeightSharing =
  | {
      readonly shared: true;
      readonly bytes: number;
      readonly cache?: string;
      /**
       * This session holds a copy of its own, which ONNX Runtime pre-packs for its kernels;
       * the process's other sessions of the model read the shared mapping (see openSession).
       */
      readonly ownCopy?: true;
    }
  | { readonly shared: false; readonly reason: string };

export interface OpenedSession {
  readonly session: InferenceSession;
  /** The shared bytes the session reads its weights from: held as long as the session. */
  readonly weights: ArrayBuffer | undefined;
  readonly sharing: WeightSharing;
  /** What the session leaves behind once released (a claim on the own copy). */
  readonly release?: () => void;
}

/**
 * Opens a session whose weights every session of the same model in this process shares.
 *
 * The model optimized as configured is saved in ORT format (kept in `config.optimizedModelCache`
 * across restarts); the file is mapped once per process (`@kiln/shared-file-native`), and
 * sessions read their initializers in place from it
 * (`session.use_ort_model_bytes_for_initializers`), so each worker thread adds its
 * activations, not another copy of the weights. Sessions skip graph optimization: the saved
 * model is already optimized, which makes them open in milliseconds. Where sharing cannot be
 * done, the session gets its own copy and `sharing` says why.
 */
export async function openSession(
  ort: OrtModule,
  modelPath: string,
  config: OrtSessionConfig,
  options: InferenceSession.SessionOptions,
): Promise<OpenedSession> {
  const refusal = sharingRefusal(config);
  if (refusal) return ownCopy(ort, modelPath, options, refusal);
  const load = loadSharedFileAddon();
  if (load.problem !== undefined) {
    return ownCopy(ort, modelPath, options, load.problem.split('\n')[0]!);
  }
  const { addon } = load;
  const key = await sharingKey(ort, modelPath, config);
  // One thread makes the mapping; the others wait for it rather than each optimizing the
  // model at once (and keeping the memory that took).
  let weights = addon.find(key.optimized);
  let cache: string | undefined;
  while (!weights) {
    const claim = addon.claim(key.optimized);
    if (claim.startsWith('failed: ')) return ownCopy(ort, modelPath, options, claim.slice(8));
    if (claim === 'busy') {
      await delay(CLAIM_POLL_MS);
      weights = addon.find(key.optimized);
      continue;
    }
    const made = await mapOptimized(ort, addon, key, modelPath, config, options);
    if ('reason' in made) return ownCopy(ort, modelPath, options, made.reason);
    ({ weights, cache } = made);
  }
  // ONNX Runtime does not pre-pack weights it reads in place, and its kernels run slower on
  // unpacked weights (ResNet-18: 15–25 % a forward). The first session of a model in the
  // process copies them, and is pre-packed; the sessions added beside it read the mapping. The
  // claim lasts as long as that session (or its thread), after which the next one owns a copy.
  const ownClaim = `${key.optimized}#own`;
  const keepsOwnCopy = config.shareWeights !== 'all' && addon.claim(ownClaim) === 'claimed';
  const release = keepsOwnCopy ? () => addon.unclaim(ownClaim, '') : undefined;
  try {
    const session = await ort.InferenceSession.create(new Uint8Array(weights), {
      ...options,
      graphOptimizationLevel: 'disabled',
      ...(keepsOwnCopy
        ? {}
        : {
            extra: withSessionEntries(options.extra, {
              use_ort_model_bytes_directly: '1',
              use_ort_model_bytes_for_initializers: '1',
            }),
          }),
    });
    const bytes = weights.byteLength;
    return {
      session,
      // An own copy needs the mapping no longer than its opening took.
      weights: keepsOwnCopy ? undefined : weights,
      sharing: {
        shared: true,
        bytes,
        ...(cache ? { cache } : {}),
        ...(keepsOwnCopy ? { ownCopy: true as const } : {}),
      },
      ...(release ? { release } : {}),
    };
  } catch (error) {
    release?.();
    // A cache entry this ORT cannot open (damaged, or another build's) is optimized again next time.
    if (cache === 'hit' && config.optimizedModelCache) {
      await discardCacheEntry(config.optimizedModelCache, key);
    }
    return ownCopy(ort, modelPath, options, `opening the shared model: ${messageOf(error)}`);
  }
}

/**
 * Finds or makes the optimized model file, maps it under the key and gives the claim back,
 * recording why when it could not (later sessions of the model then keep their own copies).
 */
async function mapOptimized(
  ort: OrtModule,
  addon: SharedFileAddon,
  key: OptimizedModelKey,
  modelPath: string,
  config: OrtSessionConfig,
  options: InferenceSession.SessionOptions,
): Promise<{ weights: ArrayBuffer; cache: string } | { reason: string }> {
  let failure: string | undefined;
  try {
    let optimized;
    try {
      optimized = await optimizedModelFile(
        ort,
        modelPath,
        options,
        key,
        config.optimizedModelCache,
      );
    } catch (error) {
      failure = `saving the model in ORT format: ${messageOf(error)}`;
      return { reason: failure };
    }
    try {
      // The mapping outlives a temporary file: it is removed at once.
      return { weights: addon.share(key.optimized, optimized.file), cache: optimized.cache };
    } catch (error) {
      failure = `mapping the optimized model: ${messageOf(error)}`;
      return { reason: failure };
    } finally {
      await optimized.release();
    }
  } finally {
    addon.unclaim(key.optimized, failure);
  }
}

function sharingRefusal(config: OrtSessionConfig): string | undefined {
  if (!config.shareWeights) return 'option.shareWeights=false';
  if (config.ortDevice !== 'cpu') return `the weights live on the ${config.ortDevice} device`;
  if (config.optimizedModelFilePath !== undefined) return 'option.optimizedModelFilePath is set';
  // Profiling reads the one trace its session writes; an optimizing session would write another.
  if (config.profiling) return 'option.profiling=true';
  return undefined;
}

async function ownCopy(
  ort: OrtModule,
  modelPath: string,
  options: InferenceSession.SessionOptions,
  reason: string,
): Promise<OpenedSession> {
  const session = await ort.InferenceSession.create(modelPath, options);
  return { session, weights: undefined, sharing: { shared: false, reason } };
}

/**
 * Identifies the optimized model: the same file, unchanged, optimized the same way by the same
 * ONNX Runtime on the same kind of CPU (an NCHWc-optimized model suits its machine only).
 * `model` names the file alone, so that a new version of it replaces the old one's cache entry.
 */
async function sharingKey(
  ort: OrtModule,
  modelPath: string,
  config: OrtSessionConfig,
): Promise<OptimizedModelKey> {
  const file = await stat(modelPath, { bigint: true });
  const version = (ort.env.versions as { node?: string } | undefined)?.node ?? 'unknown';
  const model = sha256(await realpath(modelPath)).slice(0, 16);
  const optimized = sha256(
    [
      version,
      `${file.dev}:${file.ino}:${file.size}:${file.mtimeNs}`,
      config.optLevel,
      process.arch,
      cpus()[0]?.model ?? 'unknown cpu',
    ].join('|'),
  ).slice(0, 32);
  return { model, optimized: `${model}-${optimized}` };
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
