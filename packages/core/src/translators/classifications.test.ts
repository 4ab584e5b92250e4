import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tensor } from '../tensor/tensor.js';
import {
  classScores,
  looksLikeProbabilities,
  parseSynset,
  readSynset,
  softmax,
  toProbabilities,
  topClassifications,
} from './classifications.js';

describe('softmax and probabilities', () => {
  it('computes softmax stably for large logits', () => {
    const p = softmax(new Float64Array([1000, 1001, 1002]));
    const e = [Math.exp(-2), Math.exp(-1), 1];
    const sum = e[0]! + e[1]! + e[2]!;
    expect(Array.from(p).map((v) => +v.toFixed(12))).toEqual(e.map((v) => +(v / sum).toFixed(12)));
  });

  it('recognises outputs that are already probabilities', () => {
    expect(looksLikeProbabilities(new Float64Array([0.7, 0.2, 0.1]))).toBe(true);
    expect(looksLikeProbabilities(new Float64Array([0.7, 0.2, 0.05]))).toBe(false);
    expect(looksLikeProbabilities(new Float64Array([1.2, -0.2]))).toBe(false);
    expect(looksLikeProbabilities(new Float64Array([0.5, Number.NaN, 0.5]))).toBe(false);
  });

  it('applies softmax in auto mode only to scores that are not probabilities', () => {
    const probabilities = new Float64Array([0.25, 0.75]);
    expect(toProbabilities(probabilities, 'auto')).toBe(probabilities);
    expect(toProbabilities(new Float64Array([0, Math.log(3)]), 'auto')[1]).toBeCloseTo(0.75, 12);
    expect(toProbabilities(probabilities, true)[1]).toBeCloseTo(
      Math.exp(0.75) / (Math.exp(0.25) + Math.exp(0.75)),
      12,
    );
    expect(toProbabilities(new Float64Array([3, 4]), false)[1]).toBe(4);
  });
});

describe('topClassifications', () => {
  it('returns the k best, best first, with labels', () => {
    const p = new Float64Array([0.1, 0.4, 0.05, 0.3, 0.15]);
    expect(topClassifications(p, 3, ['a', 'b', 'c', 'd', 'e'])).toEqual([
      { className: 'b', probability: 0.4 },
      { className: 'd', probability: 0.3 },
      { className: 'e', probability: 0.15 },
    ]);
  });

  it('names classes without a label by their index and keeps ties in index order', () => {
    const p = new Float64Array([0.2, 0.3, 0.2, 0.3]);
    expect(topClassifications(p, 10, ['zero']).map((c) => c.className)).toEqual([
      '1',
      '3',
      'zero',
      '2',
    ]);
  });

  it('matches a full sort on random scores and skips NaN', () => {
    const scores = Float64Array.from({ length: 1000 }, (_, i) =>
      i === 17 ? Number.NaN : (Math.sin(i * 12.9898) * 43758.5453) % 1,
    );
    const sorted = Array.from(scores.keys())
      .filter((i) => !Number.isNaN(scores[i]!))
      .sort((a, b) => scores[b]! - scores[a]! || a - b)
      .slice(0, 5);
    expect(topClassifications(scores, 5, []).map((c) => Number(c.className))).toEqual(sorted);
  });
});

describe('classScores', () => {
  it('reads the first row of a batched output', () => {
    const tensor = new Tensor('float32', new Float32Array([1, 2, 3]), [1, 3]);
    expect(Array.from(classScores(tensor))).toEqual([1, 2, 3]);
  });

  it('converts float16, bfloat16 and integer outputs', () => {
    // 0x3c00 = 1.0 and 0xc000 = -2.0 in float16; 0x3f80 = 1.0 and 0x4040 = 3.0 in bfloat16.
    expect(
      Array.from(classScores(new Tensor('float16', new Uint16Array([0x3c00, 0xc000]), [1, 2]))),
    ).toEqual([1, -2]);
    expect(
      Array.from(classScores(new Tensor('bfloat16', new Uint16Array([0x3f80, 0x4040]), [2]))),
    ).toEqual([1, 3]);
    expect(
      Array.from(classScores(new Tensor('int64', new BigInt64Array([5n, -1n]), [1, 2]))),
    ).toEqual([5, -1]);
  });

  it('rejects string outputs', () => {
    expect(() => classScores(new Tensor('string', ['a'], [1]))).toThrow(/numeric/);
  });
});

describe('synset labels', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kiln-synset-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('drops WordNet ids and keeps plain lines as they are', () => {
    const text =
      'n01440764 tench, Tinca tinca\r\nn01443537 goldfish, Carassius auratus\ncat\nhot dog\n\n';
    expect(parseSynset(text)).toEqual([
      'tench, Tinca tinca',
      'goldfish, Carassius auratus',
      'cat',
      'hot dog',
    ]);
  });

  it('reads the labels file from the model folder, or none when it is absent', async () => {
    await writeFile(path.join(dir, 'synset.txt'), 'n00000001 first\nsecond\n');
    expect(await readSynset(dir, 'synset.txt')).toEqual(['first', 'second']);
    expect(await readSynset(dir, 'labels.txt')).toEqual([]);
  });

  it('refuses a labels file outside the model folder', async () => {
    await expect(readSynset(dir, '../etc/passwd')).rejects.toMatchObject({
      code: 'ARCHIVE_UNSAFE',
    });
    await expect(readSynset(dir, '/etc/passwd')).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    await mkdir(path.join(dir, 'folder.txt'));
    await expect(readSynset(dir, 'folder.txt')).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    await symlink('/etc/hostname', path.join(dir, 'linked.txt'));
    await expect(readSynset(dir, 'linked.txt')).rejects.toMatchObject({ code: 'ARCHIVE_UNSAFE' });
  });
});
