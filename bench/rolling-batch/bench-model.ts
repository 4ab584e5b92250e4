// The decoder the rolling-batch bench serves: the GPT the project trains on the King James
// Bible (default), a model folder of one's own, or a large random-weight decoder.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { loadTextTokenizer } from '@kiln/core';
import { KJV_PROGRAM, gptDecoderModel, tinyGptUnavailable, trainTinyGpt } from '@kiln/model-tools';

export interface BenchModel {
  readonly dir: string;
  /** One line saying what the model is. */
  readonly description: string;
  /**
   * A prompt of `length` tokens from the training text, starting at verse `pick(verses)`;
   * absent for random weights (random prompts).
   */
  readonly prompt?: (pick: (bound: number) => number, length: number) => number[];
  /** Token ids as text, to show what the model wrote. */
  readonly decode?: (tokens: readonly number[]) => string;
}

export interface RandomDecoderSize {
  readonly layers: number;
  readonly hidden: number;
  readonly heads: number;
  readonly attentionDim: number;
}

/** The trained tiny GPT (trained once, then reused from the OS temp dir), or `dir` when given. */
export async function trainedModel(
  dir: string | undefined,
  log: (line: string) => void,
): Promise<BenchModel> {
  let description: string;
  if (dir === undefined) {
    const problem = tinyGptUnavailable();
    if (problem) throw new Error(`cannot train the tiny GPT: ${problem}; pass --model or --random`);
    log('training the tiny GPT, or reusing an earlier training (about 5 min the first time)');
    const model = await trainTinyGpt({ log });
    dir = model.dir;
    const t = model.training;
    description = `the tiny GPT trained on the KJV (${t.steps} steps, loss ${t.final_loss.toFixed(2)})`;
  } else {
    description = dir;
  }
  const tokenizer = await loadTextTokenizer(dir);
  const verses = psalms();
  const prompt = (pick: (bound: number) => number, length: number) => {
    const tokens: number[] = [];
    for (let v = pick(verses.length); tokens.length < length; v = (v + 1) % verses.length)
      tokens.push(...tokenizer.encode(`${verses[v]} `));
    return tokens.slice(0, length);
  };
  return {
    dir,
    description,
    ...(verses.length > 0 ? { prompt } : {}),
    decode: (tokens) => tokenizer.decode(tokens),
  };
}

/** A random-weight GPT-2-style decoder written into `root`; heavy per token, noise out. */
export async function randomModel(root: string, size: RandomDecoderSize): Promise<BenchModel> {
  const model = await gptDecoderModel(join(root, 'gpt'), { ...size, maxLen: 512 });
  return {
    dir: model.dir,
    description: `random weights, ${size.layers} layers, hidden ${size.hidden} (feed-forward ${4 * size.hidden}), attention ${size.heads} heads × ${size.attentionDim / size.heads}`,
  };
}

/** The parseArgs options that choose the model, shared by the benches of this folder. */
export const BENCH_MODEL_OPTIONS = {
  /** A KV-cache decoder folder; default: the tiny GPT trained on the KJV. */
  model: { type: 'string' },
  /** A random-weight decoder of the size below instead. */
  random: { type: 'boolean', default: false },
  layers: { type: 'string', default: '2' },
  hidden: { type: 'string', default: '1024' },
  attention: { type: 'string', default: '64' },
  heads: { type: 'string', default: '2' },
} as const;

/** The model the parsed BENCH_MODEL_OPTIONS choose; a random one is written into `root`. */
export function benchModelFrom(
  values: {
    model?: string | undefined;
    random?: boolean | undefined;
    layers: string;
    hidden: string;
    attention: string;
    heads: string;
  },
  root: string,
): Promise<BenchModel> {
  return values.random
    ? randomModel(root, {
        layers: Number(values.layers),
        hidden: Number(values.hidden),
        heads: Number(values.heads),
        attentionDim: Number(values.attention),
      })
    : trainedModel(values.model, (line) => console.log(`  ${line}`));
}

/** The Psalms from Debian's bible-kjv, one verse each, references stripped; none without it. */
function psalms(): string[] {
  const out = spawnSync(KJV_PROGRAM, ['-f', 'Ps1:1-Ps150:6'], {
    encoding: 'utf8',
    maxBuffer: 16 << 20,
  });
  if (out.status !== 0) return [];
  return out.stdout
    .split('\n')
    .map((line) => line.replace(/^\S+ /, '').trim())
    .filter(Boolean);
}
