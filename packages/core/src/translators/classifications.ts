import { readFile, stat } from 'node:fs/promises';
import { fromBfloat16Bits, fromFloat16Bits } from '../codecs/float16.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { AnyTensor } from '../tensor/tensor.js';
import { resolveModelFile } from './model-relative-path.js';
import type { SoftmaxMode } from './image-options.js';

/** One entry of DJL's Classifications. */
export interface Classification {
  readonly className: string;
  readonly probability: number;
}

/** Sums further than this from 1 mean the scores are not a probability distribution. */
const PROBABILITY_SUM_TOLERANCE = 1e-2;
const MAX_SYNSET_BYTES = 16 * 1024 * 1024;

/** The scores of the first (and only) row of a classifier output, as float64. */
export function classScores(tensor: AnyTensor): Float64Array {
  const rows = tensor.rank >= 2 ? tensor.shape[0]! : 1;
  const count = rows === 0 ? 0 : tensor.size / rows;
  const scores = new Float64Array(count);
  switch (tensor.dtype) {
    case 'string':
      throw new KilnError(
        KilnErrorCode.UnsupportedDType,
        'a classifier output must be numeric, got string',
      );
    case 'float16':
    case 'bfloat16': {
      const data = tensor.data as Uint16Array;
      const decode = tensor.dtype === 'float16' ? fromFloat16Bits : fromBfloat16Bits;
      for (let i = 0; i < count; i++) scores[i] = decode(data[i]!);
      break;
    }
    default: {
      const data = tensor.data as ArrayLike<number | bigint>;
      for (let i = 0; i < count; i++) scores[i] = Number(data[i]);
    }
  }
  return scores;
}

export function softmax(scores: Float64Array): Float64Array {
  let max = -Infinity;
  for (const s of scores) if (s > max) max = s;
  const out = new Float64Array(scores.length);
  let sum = 0;
  for (let i = 0; i < scores.length; i++) {
    out[i] = Math.exp(scores[i]! - max);
    sum += out[i]!;
  }
  for (let i = 0; i < out.length; i++) out[i]! /= sum;
  return out;
}

/** Every score within [0, 1] and a total of 1: already the output of a softmax. */
export function looksLikeProbabilities(scores: Float64Array): boolean {
  let sum = 0;
  for (const s of scores) {
    if (!(s >= 0 && s <= 1)) return false;
    sum += s;
  }
  return scores.length > 0 && Math.abs(sum - 1) <= PROBABILITY_SUM_TOLERANCE;
}

export function toProbabilities(scores: Float64Array, mode: SoftmaxMode): Float64Array {
  const apply = mode === 'auto' ? !looksLikeProbabilities(scores) : mode;
  return apply ? softmax(scores) : scores;
}

/** The k best classes, best first; ties keep the lower class index first. NaN never ranks. */
export function topClassifications(
  probabilities: Float64Array,
  k: number,
  labels: readonly string[],
): Classification[] {
  const best: number[] = [];
  for (let i = 0; i < probabilities.length; i++) {
    const p = probabilities[i]!;
    if (Number.isNaN(p)) continue;
    if (best.length === k) {
      if (p <= probabilities[best[k - 1]!]!) continue;
      best.pop();
    }
    let at = best.length;
    while (at > 0 && probabilities[best[at - 1]!]! < p) at--;
    best.splice(at, 0, i);
  }
  return best.map((i) => ({ className: labels[i] ?? String(i), probability: probabilities[i]! }));
}

/**
 * Labels in DJL's synset format: `n01440764 tench, Tinca tinca` gives `tench, Tinca tinca`
 * (an ImageNet WordNet id first is dropped); other lines are labels as they are.
 */
export function parseSynset(text: string): string[] {
  const lines = text.split(/\r?\n/);
  while (lines.length > 0 && lines[lines.length - 1]!.trim() === '') lines.pop();
  return lines.map((line) => line.replace(/^n\d{8}\s+/, '').trim());
}

/** Labels from a file in the model folder; none (class indices) when the file is absent. */
export async function readSynset(modelDir: string, fileName: string): Promise<string[]> {
  const file = await resolveModelFile(modelDir, fileName, 'labels file');
  if (!file) return [];
  const info = await stat(file);
  if (!info.isFile()) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `labels file ${fileName} is not a regular file`,
    );
  }
  if (info.size > MAX_SYNSET_BYTES) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `labels file ${fileName} is ${info.size} bytes, more than ${MAX_SYNSET_BYTES}`,
    );
  }
  return parseSynset(await readFile(file, 'utf8'));
}
