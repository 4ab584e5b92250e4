import { KilnError, KilnErrorCode, NDList, Tensor } from '@kiln/core';
import type { DecoderSignature } from './decoder-signature.js';
import { KvCache } from './kv-cache.js';

/** Runs one batch of named inputs through the decoder's session. */
export type RunSession = (inputs: NDList) => Promise<NDList>;

export interface KvStepEntry {
  readonly id: number;
  readonly tokens: readonly number[];
}

/**
 * The KV caches of many sequences beside the session that fills them (both on the session's
 * thread, so a step moves only token ids in and logits out). A step gathers the caches into
 * one batch (left-padding shorter pasts, right-padding shorter inputs, masking both), runs
 * the session, and appends each sequence's new keys and values. Decode entries (one token)
 * and prefill chunks run as separate batches, so that a one-token decode is never padded to
 * a prompt chunk's length.
 */
export class KvBatchRunner {
  private readonly caches = new Map<number, KvCache>();

  constructor(
    private readonly run: RunSession,
    readonly signature: DecoderSignature,
    readonly maxSequenceLength: number,
  ) {}

  /** Float32 values the caches hold, spare capacity included. */
  get allocatedFloats(): number {
    let floats = 0;
    for (const cache of this.caches.values()) floats += cache.allocatedFloats;
    return floats;
  }

  release(id: number): void {
    this.caches.delete(id);
  }

  /** Logits of each entry's last fed position, in entry order. */
  async step(entries: readonly KvStepEntry[]): Promise<Float32Array[]> {
    const logits: Float32Array[] = new Array(entries.length);
    const decode: number[] = [];
    const prefill: number[] = [];
    entries.forEach((e, i) => (e.tokens.length === 1 ? decode : prefill).push(i));
    for (const group of [decode, prefill]) {
      if (group.length === 0) continue;
      const out = await this.runBatch(group.map((i) => entries[i]!));
      group.forEach((i, j) => (logits[i] = out[j]!));
    }
    return logits;
  }

  private cache(id: number): KvCache {
    let cache = this.caches.get(id);
    if (!cache) {
      const { layers, heads, headSize } = this.signature;
      cache = new KvCache(layers, heads, headSize);
      this.caches.set(id, cache);
    }
    return cache;
  }

  private async runBatch(entries: readonly KvStepEntry[]): Promise<Float32Array[]> {
    const { layers, heads, headSize, vocabSize } = this.signature;
    const states = entries.map((e) => this.cache(e.id));
    entries.forEach(({ tokens }, row) => {
      if (tokens.length === 0)
        throw new KilnError(KilnErrorCode.InvalidInput, 'a step entry has no tokens');
      if (states[row]!.length + tokens.length > this.maxSequenceLength)
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `a sequence would exceed the model's ${this.maxSequenceLength} positions`,
        );
    });
    const batch = entries.length;
    const past = Math.max(...states.map((s) => s.length));
    const fresh = Math.max(...entries.map((e) => e.tokens.length));
    const total = past + fresh;
    const ids = new BigInt64Array(batch * fresh);
    const positions = new BigInt64Array(batch * fresh);
    const mask = new BigInt64Array(batch * total);
    entries.forEach(({ tokens }, row) => {
      const seen = states[row]!.length;
      for (let t = 0; t < tokens.length; t++) {
        ids[row * fresh + t] = BigInt(tokens[t]!);
        positions[row * fresh + t] = BigInt(seen + t);
      }
      mask.fill(1n, row * total + past - seen, row * total + past + tokens.length);
    });
    const tensors: Tensor[] = [
      new Tensor('int64', ids, [batch, fresh], 'input_ids'),
      new Tensor('int64', mask, [batch, total], 'attention_mask'),
      new Tensor('int64', positions, [batch, fresh], 'position_ids'),
    ];
    for (let layer = 0; layer < layers; layer++) {
      for (const kind of ['key', 'value'] as const) {
        const data = new Float32Array(batch * heads * past * headSize);
        states.forEach((state, row) => state.gatherInto(layer, kind, data, row, past));
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
    const output = await this.run(new NDList(tensors));
    const logits = output.get('logits').data as Float32Array;
    entries.forEach(({ tokens }, row) => states[row]!.reserve(tokens.length));
    for (let layer = 0; layer < layers; layer++) {
      for (const kind of ['key', 'value'] as const) {
        const present = output.get(`present.${layer}.${kind}`).data as Float32Array;
        entries.forEach(({ tokens }, row) =>
          states[row]!.appendFrom(layer, kind, present, row, total, past, tokens.length),
        );
      }
    }
    return entries.map(({ tokens }, row) => {
      states[row]!.commit(tokens.length);
      const at = (row * fresh + tokens.length - 1) * vocabSize;
      return logits.slice(at, at + vocabSize);
    });
  }
}
