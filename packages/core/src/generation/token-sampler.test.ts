import { describe, expect, it } from 'vitest';
import {
  type SamplingParams,
  TokenSampler,
  argmax,
  logSoftmaxAt,
  topLogprobs,
} from './token-sampler.js';

/** The sampler as it was: a full sort of the vocabulary per token. The new one must agree. */
class FullSortSampler {
  private state: number;

  constructor(private readonly params: SamplingParams) {
    this.state = params.seed! >>> 0;
  }

  next(logits: Float32Array, history: readonly number[]): number {
    const scores = Float64Array.from(logits);
    const penalty = this.params.repetitionPenalty ?? 1;
    if (penalty !== 1) {
      for (const token of new Set(history)) {
        const s = scores[token]!;
        scores[token] = s > 0 ? s / penalty : s * penalty;
      }
    }
    if (!this.params.doSample) return argmax(scores);
    const temperature = this.params.temperature ?? 1;
    let order = Array.from(scores.keys()).sort((a, b) => scores[b]! - scores[a]! || a - b);
    const topK = this.params.topK ?? 0;
    if (topK > 0 && topK < order.length) order = order.slice(0, topK);
    const top = scores[order[0]!]!;
    const weights = order.map((t) => Math.exp((scores[t]! - top) / temperature));
    const total = weights.reduce((a, b) => a + b, 0);
    const topP = this.params.topP ?? 1;
    let keep = order.length;
    if (topP < 1) {
      let mass = 0;
      for (let i = 0; i < order.length; i++) {
        mass += weights[i]! / total;
        if (mass >= topP) {
          keep = i + 1;
          break;
        }
      }
    }
    const kept = weights.slice(0, keep).reduce((a, b) => a + b, 0);
    let u = this.random() * kept;
    for (let i = 0; i < keep; i++) {
      u -= weights[i]!;
      if (u < 0) return order[i]!;
    }
    return order[keep - 1]!;
  }

  private random(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

/** A seeded source for the test's own logits and parameters. */
function randomSource(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Logits spread like a model's; `levels` > 0 rounds them onto that many values (ties). */
function randomLogits(vocab: number, random: () => number, spread: number, levels = 0) {
  const logits = new Float32Array(vocab);
  for (let i = 0; i < vocab; i++) {
    // A peaked head over a flat tail, as a language model's logits look.
    const x = (random() + random() + random() - 1.5) * spread + (random() < 0.01 ? spread : 0);
    logits[i] = levels > 0 ? Math.round(x * levels) / levels : x;
  }
  return logits;
}

function randomParams(random: () => number, seed: number): SamplingParams {
  const pick = <T>(options: readonly T[]) => options[Math.floor(random() * options.length)]!;
  return {
    doSample: random() < 0.9,
    seed,
    temperature: pick([undefined, 0.05, 0.7, 1, 1.3, 5]),
    topK: pick([undefined, 0, 1, 2, 5, 40, 1000, 100_000]),
    topP: pick([undefined, 1, 0.999, 0.95, 0.9, 0.5, 0.1, random() * 0.999 + 0.001]),
    repetitionPenalty: pick([undefined, 1, 1.2, 0.8]),
  };
}

describe('TokenSampler', () => {
  it('chooses the token the full sort chose, for any logits, ties, seed and parameters', () => {
    const random = randomSource(7);
    let checked = 0;
    for (const [vocab, rounds] of [
      [5, 300],
      [17, 300],
      [97, 200],
      [1000, 100],
      [50_257, 12],
    ] as const) {
      for (let round = 0; round < rounds; round++) {
        const params = randomParams(random, Math.floor(random() * 2 ** 32));
        const spread = [1, 8, 30][round % 3]!;
        const levels = [0, 0, 4, 1][round % 4]!;
        const [sampler, reference] = [new TokenSampler(params), new FullSortSampler(params)];
        const history: number[] = [];
        for (let token = 0; token < 4; token++) {
          const logits = randomLogits(vocab, random, spread, levels);
          const expected = reference.next(logits, history);
          expect({ params, vocab, token, chosen: sampler.next(logits, history) }).toEqual({
            params,
            vocab,
            token,
            chosen: expected,
          });
          history.push(expected);
          checked++;
        }
      }
    }
    expect(checked).toBe(4 * (300 + 300 + 200 + 100 + 12));
  });

  it('greedy: the first of the highest logits, unless a penalty or a mask reshapes them', () => {
    const logits = Float32Array.of(0.5, 3, 3, 2);
    expect(new TokenSampler({ doSample: false }).next(logits, [1])).toBe(1);
    // The repeated token falls behind its tie: 3 ÷ 2 < 3.
    expect(new TokenSampler({ doSample: false, repetitionPenalty: 2 }).next(logits, [1])).toBe(2);
    // A grammar that allows token 3 alone.
    expect(new TokenSampler({ doSample: false }).next(logits, [], Int32Array.of(1 << 3))).toBe(3);
    // The logits themselves are left as they were.
    expect([...logits]).toEqual([0.5, 3, 3, 2]);
  });

  it('agrees where a mass or the draw lands exactly on a boundary', () => {
    // Equal logits: cumulative masses hit 1/4, 1/2, 3/4 exactly.
    const flat = new Float32Array(4);
    for (const topP of [0.25, 0.5, 0.75, 1]) {
      for (let seed = 0; seed < 50; seed++) {
        const params = { doSample: true, topP, seed };
        const [sampler, reference] = [new TokenSampler(params), new FullSortSampler(params)];
        for (let i = 0; i < 5; i++) expect(sampler.next(flat, [])).toBe(reference.next(flat, []));
      }
    }
  });

  it('agrees where the sum in index order rounds otherwise than the sum in rank order', () => {
    // Logits whose weights sum to more in index order than in rank order, and a top-p equal
    // to the rank-order mass of the first six: a walk by the index-order sum keeps seven.
    const random = randomSource(3);
    for (let found = 0, tries = 0; found < 5 && tries < 1000; tries++) {
      const logits = randomLogits(1000, random, 8);
      const order = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b);
      const weights = order.map((t) => Math.exp(logits[t]! - logits[order[0]!]!));
      const ranked = weights.reduce((a, b) => a + b, 0);
      const indexed = Array.from(logits, (l) => Math.exp(l - logits[order[0]!]!)).reduce(
        (a, b) => a + b,
        0,
      );
      if (indexed <= ranked) continue;
      found++;
      let topP = 0;
      for (const w of weights.slice(0, 6)) topP += w / ranked;
      for (let seed = 0; seed < 40; seed++) {
        const params = { doSample: true, topP, seed };
        const [sampler, reference] = [new TokenSampler(params), new FullSortSampler(params)];
        expect(sampler.next(logits, [])).toBe(reference.next(logits, []));
      }
    }
  });

  it('answers the log-probability of the chosen token at temperature 1, after the penalty', () => {
    const logits = new Float32Array([2, 1, 0.5, -1]);
    const sampler = new TokenSampler({ repetitionPenalty: 2 });
    const { token, logprob } = sampler.nextWithLogprob(logits, [0]);
    // Token 0's 2 is halved to 1: tokens 0 and 1 tie and the lower id wins.
    expect(token).toBe(0);
    const exps = [1, 1, 0.5, -1].map(Math.exp);
    expect(logprob).toBeCloseTo(Math.log(exps[0]! / exps.reduce((a, b) => a + b)), 12);
    const hot = new TokenSampler({ doSample: true, temperature: 50, seed: 3 });
    const chosen = hot.nextWithLogprob(logits, []);
    expect(chosen.logprob).toBeCloseTo(logSoftmaxAt(Float64Array.from(logits), chosen.token), 12);
  });

  it('chooses the same tokens through next and nextWithLogprob', () => {
    const random = randomSource(11);
    const params = { doSample: true, topK: 50, topP: 0.9, seed: 5 };
    const [a, b] = [new TokenSampler(params), new TokenSampler(params)];
    for (let i = 0; i < 20; i++) {
      const logits = randomLogits(500, random, 8);
      expect(b.nextWithLogprob(logits, []).token).toBe(a.next(logits, []));
    }
  });
});

describe('topLogprobs', () => {
  it('answers the k most likely tokens in rank order, as a full sort does', () => {
    const random = randomSource(7);
    for (const k of [1, 2, 5, 20]) {
      const logits = randomLogits(300, random, 6);
      // Ties too: lower ids rank first.
      logits[10] = logits[11] = logits[argmax(logits)]!;
      const sorted = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b);
      const top = topLogprobs(logits, k);
      expect(top.map((t) => t.token)).toEqual(sorted.slice(0, k));
      for (const { token, logprob } of top)
        expect(logprob).toBeCloseTo(logSoftmaxAt(Float64Array.from(logits), token), 12);
    }
    expect(topLogprobs(new Float32Array([1, 2]), 5).map((t) => t.token)).toEqual([1, 0]);
    expect(topLogprobs(new Float32Array([1, 2]), 0)).toEqual([]);
  });
});
