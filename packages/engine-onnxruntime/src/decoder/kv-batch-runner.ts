import { KilnError, KilnErrorCode, NDList, Tensor, fromFloat16BitsArray } from '@kiln/core';
import { type CacheArray, type DecoderSignature, cacheArray } from './decoder-signature.js';
import { KvCache } from './kv-cache.js';
import { newKvOutputName } from './new-kv-outputs.js';
import { ResidentBatch } from './resident-batch.js';
import type { DecodeRunCosts } from './run-costs.js';
import { SlotBatch } from './slot-batch.js';

/**
 * Runs one batch of named inputs through the decoder's session, handing back the outputs
 * `fetch` names (by default the model's own).
 */
export type RunSession = (inputs: NDList, fetch?: readonly string[]) => Promise<NDList>;

export interface KvStepEntry {
  readonly id: number;
  readonly tokens: readonly number[];
  /**
   * The run it is computed in, as the scheduler grouped the step (see groupByPast in
   * `@kiln/batching`). Left out: one run for the decode rows, one for the prompt chunks.
   */
  readonly run?: number | undefined;
}

/**
 * The KV caches of many sequences beside the session that fills them (both on the session's
 * thread, so a step moves only token ids in and logits out). A step gathers the caches into
 * one batch (left-padding shorter pasts, right-padding shorter inputs, masking both), runs
 * the session, and appends each sequence's new keys and values. Decode entries (one token)
 * and prefill chunks run as separate batches, so that a one-token decode is never padded to
 * a prompt chunk's length.
 *
 * Entries run as the scheduler grouped them (each entry's `run`): the rolling loop splits
 * decode rows by past length where padding them together would cost more than another run,
 * weighing `runCost`, which this runner learns from the decode runs it times.
 *
 * A decoder that hands back each run's new positions alone (`signature.newKvOutputs`) keeps
 * each decode run's caches in a SlotBatch: a step feeds them in place and appends one
 * position a row, and a sequence that joins or leaves moves one row. Any other keeps each
 * decode run's caches in the presents the session returned (a ResidentBatch) for as long as
 * the steps bring the same runs; other runs regroup and gather again.
 */
export class KvBatchRunner {
  private readonly caches = new Map<number, KvCache>();
  private residents: ResidentBatch[] = [];
  private readonly residentOf = new Map<number, ResidentBatch>();
  private slots: SlotBatch[] = [];
  private readonly slotOf = new Map<number, SlotBatch>();
  /** What a run fetches when the decoder hands back its new positions: logits and those. */
  private readonly fetch: readonly string[] | undefined;

  constructor(
    private readonly run: RunSession,
    readonly signature: DecoderSignature,
    readonly maxSequenceLength: number,
    /**
     * What one more decode run costs, in padded cache positions (rows × positions), reported
     * to the scheduler. A number holds; DecodeRunCosts learns it from the decode runs it times.
     * Infinity keeps every decode step one run.
     */
    private readonly runCosts: number | DecodeRunCosts = Infinity,
  ) {
    this.fetch = signature.newKvOutputs
      ? ['logits', ...Array.from({ length: signature.layers * 2 }, (_, i) => this.freshName(i))]
      : undefined;
  }

  /** What one more decode run is taken to cost now, in padded positions. */
  get runCost(): number {
    return typeof this.runCosts === 'number' ? this.runCosts : this.runCosts.runCost;
  }

  /** Values the caches hold (of the cache's type), spare capacity and padding included. */
  get allocatedValues(): number {
    let values = 0;
    for (const resident of this.residents) values += resident.allocatedValues;
    for (const slot of this.slots) values += slot.allocatedValues;
    for (const cache of this.caches.values()) values += cache.allocatedValues;
    return values;
  }

  release(id: number): void {
    this.caches.delete(id);
  }

  /** Logits of each entry's last fed position, in entry order. */
  async step(entries: readonly KvStepEntry[]): Promise<Float32Array[]> {
    for (const { tokens, id } of entries) {
      if (tokens.length === 0)
        throw new KilnError(KilnErrorCode.InvalidInput, 'a step entry has no tokens');
      if (this.lengthOf(id) + tokens.length > this.maxSequenceLength)
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `a sequence would exceed the model's ${this.maxSequenceLength} positions`,
        );
    }
    const runs = runsOf(entries);
    // Runs of one token a row decode on resident caches; the others append to their own.
    const decode = runs.filter((run) => run.every((i) => entries[i]!.tokens.length === 1));
    const prefill = runs.filter((run) => !decode.includes(run));
    // A prefill chunk appends to its sequence's own cache, so it must hold every position.
    if (prefill.some((run) => run.some((i) => this.residentOf.has(entries[i]!.id))))
      this.dissolveResidents();
    for (const { id } of prefill.flat().map((i) => entries[i]!)) {
      this.slotOf.get(id)?.remove(id, this.cache(id));
      this.slotOf.delete(id);
    }
    const logits: Float32Array[] = new Array(entries.length);
    if (decode.length > 0) await this.runDecode(entries, decode, logits);
    for (const run of prefill) {
      const out = await this.runPrefill(run.map((i) => entries[i]!));
      run.forEach((i, j) => (logits[i] = out[j]!));
    }
    return logits;
  }

  private cache(id: number): KvCache {
    let cache = this.caches.get(id);
    if (!cache) {
      const { layers, heads, headSize, cacheType = 'float32' } = this.signature;
      cache = new KvCache(layers, heads, headSize, cacheType);
      this.caches.set(id, cache);
    }
    return cache;
  }

  private lengthOf(id: number): number {
    return (
      this.slotOf.get(id)?.lengthOf(id) ??
      this.residentOf.get(id)?.lengthOf(id) ??
      this.cache(id).length
    );
  }

  /**
   * Gives each run the slot batch holding most of its rows; rows that left a run move out
   * (into their own caches while their sequences live), and rows new to it move in.
   */
  private reconcileSlots(runs: readonly (readonly number[])[]): void {
    const wanted = runs.map((ids) => new Set(ids));
    const pairs = runs.flatMap((ids, run) =>
      this.slots.map((slot) => ({ run, slot, shared: ids.filter((id) => slot.has(id)).length })),
    );
    pairs.sort((a, b) => b.shared - a.shared);
    const assigned: (SlotBatch | undefined)[] = runs.map(() => undefined);
    for (const { run, slot, shared } of pairs)
      if (shared > 0 && !assigned[run] && !assigned.includes(slot)) assigned[run] = slot;
    for (const slot of this.slots) {
      const keep = wanted[assigned.indexOf(slot)];
      for (const id of [...slot.ids]) {
        if (keep?.has(id)) continue;
        slot.remove(id, this.caches.get(id));
        this.slotOf.delete(id);
      }
    }
    const { layers, heads, headSize, cacheType } = this.signature;
    this.slots = runs.map((ids, run) => {
      const slot =
        assigned[run] ??
        new SlotBatch(layers, heads, headSize, this.maxSequenceLength - 1, cacheType);
      for (const id of ids) {
        if (slot.has(id)) continue;
        const cache = this.cache(id);
        slot.add(id, cache);
        cache.clear();
        this.slotOf.set(id, slot);
      }
      return slot;
    });
  }

  /** Moves the resident groups' live sequences, except `keep`, back into caches of their own. */
  private dissolveResidents(keep: ReadonlySet<number> = new Set()): void {
    for (const resident of this.residents) {
      for (const id of resident.ids) {
        const cache = this.caches.get(id);
        if (cache && !keep.has(id)) resident.moveInto(id, cache);
      }
    }
    this.residents = [];
    this.residentOf.clear();
  }

  /**
   * One token per sequence, run by run, each run on a batch kept from step to step: slot
   * batches fed in place where the session hands back new positions, else resident batches
   * while the runs stay the same.
   */
  private async runDecode(
    entries: readonly KvStepEntry[],
    runs: readonly (readonly number[])[],
    logits: Float32Array[],
  ): Promise<void> {
    const ids = runs.map((run) => run.map((i) => entries[i]!.id));
    let batches: readonly DecodeBatch[];
    if (this.fetch) {
      if (!eachRunIsOneBatch(ids, this.slotOf, this.slots.length)) this.reconcileSlots(ids);
      batches = this.slots;
    } else {
      if (!eachRunIsOneBatch(ids, this.residentOf, this.residents.length)) this.regroup(ids);
      batches = this.residents;
    }
    const index = new Map(entries.map((e, i) => [e.id, i]));
    for (const batch of batches) {
      batch.prepare();
      // The batch's rows, in its own order.
      const rows = batch.ids.map((id) => index.get(id)!);
      const group = rows.map((i) => entries[i]!);
      const started = performance.now();
      const output = await this.runSession(
        group,
        batch.lengths,
        batch.past,
        batch.pasts(),
        batch.align,
      );
      if (typeof this.runCosts !== 'number')
        this.runCosts.observe(group.length, batch.past, performance.now() - started);
      batch.advance(this.fetch ? this.freshPositions(output, 1) : this.presents(output));
      this.logitsOf(output, group, 1).forEach((row, j) => (logits[rows[j]!] = row));
    }
  }

  /** Gathers each run's pasts into a resident batch of its own. */
  private regroup(runs: readonly (readonly number[])[]): void {
    const { heads, headSize } = this.signature;
    const groups = runs.map((groupIds) => {
      const groupLengths = groupIds.map((id) => this.lengthOf(id));
      const past = Math.max(...groupLengths);
      return new ResidentBatch(
        groupIds,
        groupLengths,
        past,
        this.gather(groupIds, past),
        heads,
        headSize,
      );
    });
    const ids = runs.flat();
    // Those who left the decode rows take their positions along; the others are gathered.
    this.dissolveResidents(new Set(ids));
    for (const id of ids) this.cache(id).clear();
    this.residents = groups;
    for (const group of groups) for (const id of group.ids) this.residentOf.set(id, group);
  }

  /** Prompt chunks: gathered from and appended to each sequence's own cache. */
  private async runPrefill(entries: readonly KvStepEntry[]): Promise<Float32Array[]> {
    const states = entries.map((e) => this.cache(e.id));
    const lengths = states.map((s) => s.length);
    const past = Math.max(...lengths);
    const fresh = Math.max(...entries.map((e) => e.tokens.length));
    const output = await this.runSession(
      entries,
      lengths,
      past,
      this.gather(
        entries.map((e) => e.id),
        past,
      ),
      'right',
    );
    // The new positions alone [batch, heads, fresh, head], or the presents after the past.
    const [sources, total, start] = this.fetch
      ? [this.freshPositions(output, fresh), fresh, 0]
      : [this.presents(output), past + fresh, past];
    entries.forEach(({ tokens }, row) => states[row]!.reserve(tokens.length));
    sources.forEach((source, index) =>
      entries.forEach(({ tokens }, row) =>
        states[row]!.appendFrom(
          index >> 1,
          index & 1 ? 'value' : 'key',
          source,
          row,
          total,
          start,
          tokens.length,
        ),
      ),
    );
    entries.forEach(({ tokens }, row) => states[row]!.commit(tokens.length));
    return this.logitsOf(output, entries, fresh);
  }

  /** Pasts [batch, heads, past, head] per layer (key, then value), each row right-aligned. */
  private gather(ids: readonly number[], past: number): CacheArray[] {
    const { layers, heads, headSize, cacheType = 'float32' } = this.signature;
    return Array.from({ length: layers * 2 }, (_, index) => {
      const data = cacheArray(cacheType, ids.length * heads * past * headSize);
      ids.forEach((id, row) => {
        const resident = this.residentOf.get(id);
        if (resident) resident.gatherInto(id, index, data, row, past);
        else this.cache(id).gatherInto(index >> 1, index & 1 ? 'value' : 'key', data, row, past);
      });
      return data;
    });
  }

  /**
   * Runs `entries` over their pasts: each row's `lengths[row]` positions at the end of the
   * `past` positions ('right', after padding) or at their start ('left', masked spare after).
   */
  private runSession(
    entries: readonly KvStepEntry[],
    lengths: readonly number[],
    past: number,
    pasts: readonly CacheArray[],
    align: 'left' | 'right',
  ): Promise<NDList> {
    const { layers, heads, headSize, cacheType = 'float32' } = this.signature;
    const batch = entries.length;
    const fresh = Math.max(...entries.map((e) => e.tokens.length));
    const total = past + fresh;
    const ids = new BigInt64Array(batch * fresh);
    const positions = new BigInt64Array(batch * fresh);
    const mask = new BigInt64Array(batch * total);
    entries.forEach(({ tokens }, row) => {
      const seen = lengths[row]!;
      for (let t = 0; t < tokens.length; t++) {
        ids[row * fresh + t] = BigInt(tokens[t]!);
        positions[row * fresh + t] = BigInt(seen + t);
      }
      if (align === 'left') {
        mask.fill(1n, row * total, row * total + seen);
        mask.fill(1n, row * total + past, row * total + past + tokens.length);
      } else mask.fill(1n, row * total + past - seen, row * total + past + tokens.length);
    });
    const tensors: Tensor[] = [
      new Tensor('int64', ids, [batch, fresh], 'input_ids'),
      new Tensor('int64', mask, [batch, total], 'attention_mask'),
      new Tensor('int64', positions, [batch, fresh], 'position_ids'),
    ];
    const { useCacheBranch, logitsToKeep } = this.signature;
    // Optimum's merged decoder: its cache branch once there is a past, as transformers.js does.
    if (useCacheBranch)
      tensors.push(new Tensor('bool', Uint8Array.of(past > 0 ? 1 : 0), [1], 'use_cache_branch'));
    // Every new position's logits: a right-padded row's last token is not the batch's last.
    if (logitsToKeep)
      tensors.push(new Tensor('int64', BigInt64Array.of(BigInt(fresh)), [], logitsToKeep));
    for (let layer = 0; layer < layers; layer++) {
      for (const [k, kind] of (['key', 'value'] as const).entries()) {
        tensors.push(
          new Tensor(
            cacheType,
            pasts[layer * 2 + k]!,
            [batch, heads, past, headSize],
            `past_key_values.${layer}.${kind}`,
          ),
        );
      }
    }
    return this.run(new NDList(tensors), this.fetch);
  }

  /**
   * The run's new positions per layer, key then value (see withNewKvOutputs): `fresh` of them
   * a row, or the model's outputs are not what the edit took them for.
   */
  private freshPositions(output: NDList, fresh: number): CacheArray[] {
    return Array.from({ length: this.signature.layers * 2 }, (_, index) => {
      const tensor = output.get(this.freshName(index));
      if (tensor.shape[2] !== fresh)
        throw new KilnError(
          KilnErrorCode.EngineError,
          `the decoder handed back ${tensor.shape[2]} new positions a row where ${fresh} were fed`,
        );
      return tensor.data as CacheArray;
    });
  }

  private freshName(index: number): string {
    return newKvOutputName(index >> 1, index & 1 ? 'value' : 'key');
  }

  /** present.{layer}.key|value, in the order of the pasts. */
  private presents(output: NDList): CacheArray[] {
    return Array.from(
      { length: this.signature.layers * 2 },
      (_, index) =>
        output.get(`present.${index >> 1}.${index & 1 ? 'value' : 'key'}`).data as CacheArray,
    );
  }

  /** Each entry's logits at its last fed position (rows hold `fresh` positions). */
  private logitsOf(output: NDList, entries: readonly KvStepEntry[], fresh: number): Float32Array[] {
    const { vocabSize } = this.signature;
    const tensor = output.get('logits');
    const logits = tensor.data as Float32Array | Uint16Array;
    return entries.map(({ tokens }, row) => {
      const at = (row * fresh + tokens.length - 1) * vocabSize;
      // An fp16 model's logits: widened for the sampler, one row at a time.
      return tensor.dtype === 'float16'
        ? fromFloat16BitsArray((logits as Uint16Array).subarray(at, at + vocabSize))
        : (logits as Float32Array).slice(at, at + vocabSize);
    });
  }
}

/** A decode run's caches kept from step to step (a ResidentBatch or a SlotBatch). */
interface DecodeBatch {
  /** Sequence id of each row. */
  readonly ids: readonly number[];
  /** Filled positions of each row. */
  readonly lengths: readonly number[];
  /** Positions fed as each row's past. */
  readonly past: number;
  /** Where each row's positions sit among them: after padding, or from the first. */
  readonly align: 'left' | 'right';
  /** Makes the batch ready for the next step. */
  prepare(): void;
  /** The pasts fed: per layer key then value, [rows, heads, past, head]. */
  pasts(): CacheArray[];
  /** Takes in a step's presents (ResidentBatch) or new positions (SlotBatch). */
  advance(positions: CacheArray[]): void;
}

/** Whether each run holds exactly the rows of one batch, of `batches` in all. */
function eachRunIsOneBatch(
  runs: readonly (readonly number[])[],
  batchOf: ReadonlyMap<number, { readonly ids: readonly number[] }>,
  batches: number,
): boolean {
  if (runs.length !== batches) return false;
  return runs.every((ids) => {
    const batch = batchOf.get(ids[0]!);
    return (
      batch !== undefined &&
      batch.ids.length === ids.length &&
      ids.every((id) => batchOf.get(id) === batch)
    );
  });
}

/**
 * A step's entries as runs of indexes, in order of first appearance: by each entry's `run`,
 * or, where left out, one run for the decode rows (one token) and one for the prompt chunks.
 */
function runsOf(entries: readonly KvStepEntry[]): number[][] {
  const runs = new Map<number | 'decode' | 'prefill', number[]>();
  entries.forEach(({ run, tokens }, i) => {
    const key = run ?? (tokens.length === 1 ? 'decode' : 'prefill');
    const indexes = runs.get(key);
    if (indexes) indexes.push(i);
    else runs.set(key, [i]);
  });
  return [...runs.values()];
}
