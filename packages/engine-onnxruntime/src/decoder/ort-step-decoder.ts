import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  KilnError,
  KilnErrorCode,
  NDList,
  type StepDecoder,
  type StepEntry,
  Tensor,
} from '@kiln/core';
import { type OrtSessionConfig, DEFAULT_SESSION_CONFIG } from '../session-config.js';
import type { SessionHost } from '../session-host.js';
import { WorkerSessionHost } from '../worker-session-host.js';
import { type DecoderSignature, readDecoderSignature } from './decoder-signature.js';
import { KvCache } from './kv-cache.js';

export interface OrtStepDecoderOptions {
  /** Session settings; the session runs on a worker thread of its own. */
  readonly session?: Partial<OrtSessionConfig>;
  /**
   * Longest sequence the model takes; default `n_positions` (or `max_position_embeddings`)
   * from the folder's Hugging Face `config.json`.
   */
  readonly maxSequenceLength?: number;
  /** Model file inside the folder; default `model.onnx`. */
  readonly modelFile?: string;
}

/** What a decoder's `config.json` may say (Hugging Face names). */
interface HfConfig {
  readonly n_positions?: number;
  readonly max_position_embeddings?: number;
  readonly eos_token_id?: number;
}

/**
 * Runs a GPT-2-style ONNX decoder one step at a time for many sequences. Each sequence keeps
 * its own KV cache here; a step gathers the caches into one batch (left-padding shorter
 * pasts, right-padding shorter inputs, masking both), runs the session on its worker thread
 * so the event loop stays free, and appends each sequence's new keys and values. Decode
 * entries (one token) and prefill chunks run as separate batches, so a one-token decode is
 * never padded to a prompt chunk's length.
 */
export class OrtStepDecoder implements StepDecoder<KvCache> {
  readonly vocabSize: number;
  readonly cacheBytesPerToken: number;
  private readonly live = new Set<KvCache>();

  private constructor(
    private readonly host: SessionHost,
    readonly signature: DecoderSignature,
    readonly maxSequenceLength: number,
    /** From config.json, when it says. */
    readonly eosTokenId: number | undefined,
  ) {
    this.vocabSize = signature.vocabSize;
    this.cacheBytesPerToken = signature.layers * 2 * signature.heads * signature.headSize * 4;
  }

  static async load(dir: string, options: OrtStepDecoderOptions = {}): Promise<OrtStepDecoder> {
    const config = await readHfConfig(dir);
    const maxSequenceLength =
      options.maxSequenceLength ?? config.n_positions ?? config.max_position_embeddings;
    if (!maxSequenceLength)
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        "the decoder's longest sequence is unknown: give maxSequenceLength or n_positions in config.json",
      );
    const host = await WorkerSessionHost.start(join(dir, options.modelFile ?? 'model.onnx'), {
      ...DEFAULT_SESSION_CONFIG,
      ...options.session,
    });
    try {
      const signature = readDecoderSignature(host.inputs, host.outputs);
      return new OrtStepDecoder(host, signature, maxSequenceLength, config.eos_token_id);
    } catch (error) {
      await host.close();
      throw error;
    }
  }

  /** Bytes the live caches hold, spare capacity included. */
  get cacheBytesAllocated(): number {
    let floats = 0;
    for (const cache of this.live) floats += cache.allocatedFloats;
    return floats * 4;
  }

  open(): KvCache {
    const { layers, heads, headSize } = this.signature;
    const cache = new KvCache(layers, heads, headSize);
    this.live.add(cache);
    return cache;
  }

  release(state: KvCache): void {
    this.live.delete(state);
  }

  async step(entries: readonly StepEntry<KvCache>[]): Promise<readonly Float32Array[]> {
    const logits: Float32Array[] = new Array(entries.length);
    const decode: number[] = [];
    const prefill: number[] = [];
    entries.forEach((e, i) => (e.tokens.length === 1 ? decode : prefill).push(i));
    for (const group of [decode, prefill]) {
      if (group.length === 0) continue;
      const out = await this.run(group.map((i) => entries[i]!));
      group.forEach((i, j) => (logits[i] = out[j]!));
    }
    return logits;
  }

  async close(): Promise<void> {
    this.live.clear();
    await this.host.close();
  }

  private async run(entries: readonly StepEntry<KvCache>[]): Promise<Float32Array[]> {
    const { layers, heads, headSize, vocabSize } = this.signature;
    const batch = entries.length;
    const past = Math.max(...entries.map((e) => e.state.length));
    const fresh = Math.max(...entries.map((e) => e.tokens.length));
    const total = past + fresh;
    for (const { state, tokens } of entries) {
      if (state.length + tokens.length > this.maxSequenceLength)
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `a sequence would exceed the model's ${this.maxSequenceLength} positions`,
        );
    }
    const ids = new BigInt64Array(batch * fresh);
    const positions = new BigInt64Array(batch * fresh);
    const mask = new BigInt64Array(batch * total);
    entries.forEach(({ state, tokens }, row) => {
      for (let t = 0; t < tokens.length; t++) {
        ids[row * fresh + t] = BigInt(tokens[t]!);
        positions[row * fresh + t] = BigInt(state.length + t);
      }
      mask.fill(1n, row * total + past - state.length, row * total + past + tokens.length);
    });
    const tensors: Tensor[] = [
      new Tensor('int64', ids, [batch, fresh], 'input_ids'),
      new Tensor('int64', mask, [batch, total], 'attention_mask'),
      new Tensor('int64', positions, [batch, fresh], 'position_ids'),
    ];
    for (let layer = 0; layer < layers; layer++) {
      for (const kind of ['key', 'value'] as const) {
        const data = new Float32Array(batch * heads * past * headSize);
        entries.forEach(({ state }, row) => state.gatherInto(layer, kind, data, row, past));
        tensors.push(
          new Tensor(
            'float32',
            data,
            [batch, heads, past, headSize],
            `past_key_values.${layer}.${kind}`,
          ),
        );
      }
    }
    const { output } = await this.host.run(new NDList(tensors));
    const logits = output.get('logits').data as Float32Array;
    for (const { state, tokens } of entries) state.reserve(tokens.length);
    for (let layer = 0; layer < layers; layer++) {
      for (const kind of ['key', 'value'] as const) {
        const present = output.get(`present.${layer}.${kind}`).data as Float32Array;
        entries.forEach(({ state, tokens }, row) =>
          state.appendFrom(layer, kind, present, row, total, past, tokens.length),
        );
      }
    }
    return entries.map(({ state, tokens }, row) => {
      state.commit(tokens.length);
      const at = (row * fresh + tokens.length - 1) * vocabSize;
      return logits.slice(at, at + vocabSize);
    });
  }
}

async function readHfConfig(dir: string): Promise<HfConfig> {
  let text: string;
  try {
    text = await readFile(join(dir, 'config.json'), 'utf8');
  } catch {
    return {};
  }
  try {
    return JSON.parse(text) as HfConfig;
  } catch (error) {
    throw new KilnError(KilnErrorCode.InvalidConfig, `config.json is not valid JSON`, {
      cause: error,
    });
  }
}
