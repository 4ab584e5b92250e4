// Kiln against transformers.js on the same model folders: greedy tokens for prompts, and a
// long text's tokenizer encode and decode.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  AutoModelForCausalLM,
  AutoTokenizer,
  type PreTrainedTokenizer,
  type Tensor,
  env,
} from '@huggingface/transformers';
import { loadTextTokenizer } from '@kiln/core';
import { createGenerationPool } from '@kiln/worker-pool';
import type { ParityModel } from './parity-models.js';

/** A prompt: a text, or a chat the model's template renders (add_generation_prompt). */
export type ParityPrompt = string | readonly { role: string; content: string }[];

export interface GenerationRow {
  readonly prompt: ParityPrompt;
  /** Prompt ids, as each side's tokenizer encodes the prompt (special tokens added). */
  readonly kilnPrompt: readonly number[];
  readonly transformersPrompt: readonly number[];
  /** New token ids up to (not including) the first end-of-sequence token. */
  readonly kiln: readonly number[];
  readonly transformers: readonly number[];
  /** Whether each side stopped at an end-of-sequence token. */
  readonly kilnEnded: boolean;
  readonly transformersEnded: boolean;
  readonly same: boolean;
}

export interface TokenizerRow {
  readonly bytes: number;
  readonly tokens: number;
  readonly encodeSame: boolean;
  /** Where the two encodings first differ (-1 when they agree). */
  readonly firstDifference: number;
  /** Decoded alike, transformers.js told not to clean up spaces (Kiln never does). */
  readonly decodeSame: boolean;
  /**
   * Whether transformers.js's default decode (clean-up of spaces before punctuation as
   * tokenizer_config.json's clean_up_tokenization_spaces says, true when absent) gives Kiln's
   * text too: not a mismatch, a difference Kiln keeps (its text streams; clean-up loses text).
   */
  readonly cleanUpSame: boolean;
  /** Whether each side's decode gives the text back. */
  readonly kilnRoundTrip: boolean;
  readonly transformersRoundTrip: boolean;
  readonly kilnMs: number;
  readonly transformersMs: number;
}

/** transformers.js reads only local folders, `root`/<model id>. */
function useLocalModels(root: string): void {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = root;
}

/** The model's end-of-sequence ids, as generation_config.json lists them. */
async function eosIds(dir: string): Promise<Set<number>> {
  const config = JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8')) as {
    eos_token_id?: number | number[];
  };
  return new Set([config.eos_token_id ?? []].flat());
}

/** The ids before the first end-of-sequence one, and whether there was one. */
function untilEos(ids: readonly number[], eos: ReadonlySet<number>): [number[], boolean] {
  const at = ids.findIndex((id) => eos.has(id));
  return at < 0 ? [[...ids], false] : [ids.slice(0, at), true];
}

/**
 * Adds `token` to generation_config.json's end-of-sequence ids (a list, as Llama 3's end of
 * turn), so that both sides stop early on it.
 */
export async function addEndToken(dir: string, token: number): Promise<void> {
  const file = join(dir, 'generation_config.json');
  const config = JSON.parse(await readFile(file, 'utf8')) as { eos_token_id?: number | number[] };
  config.eos_token_id = [...new Set([config.eos_token_id ?? [], token].flat())];
  await writeFile(file, `${JSON.stringify(config, null, 2)}\n`);
}

const equal = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Greedy continuations of each prompt (at most `maxNewTokens`, ending at the end-of-sequence
 * token) from transformers.js (`AutoModelForCausalLM.generate`, do_sample false) and from a
 * Kiln generation pool serving the folder (prompts tokenized by the pool, all at once).
 */
export async function compareGeneration(
  root: string,
  model: ParityModel,
  prompts: readonly ParityPrompt[],
  maxNewTokens: number,
): Promise<GenerationRow[]> {
  useLocalModels(root);
  const eos = await eosIds(model.dir);
  const tokenizer = await AutoTokenizer.from_pretrained(model.id);
  const causal = await AutoModelForCausalLM.from_pretrained(model.id, { dtype: 'fp32' });
  const transformers: { prompt: number[]; out: number[] }[] = [];
  try {
    for (const prompt of prompts) {
      const inputs =
        typeof prompt === 'string'
          ? // As the text-generation pipeline does: special tokens when the tokenizer adds BOS.
            tokenizer(prompt, { add_special_tokens: addsSpecialTokens(tokenizer) })
          : (tokenizer.apply_chat_template([...prompt], {
              add_generation_prompt: true,
              return_dict: true,
            }) as Record<string, Tensor>);
      const ids = (inputs.input_ids as Tensor).tolist() as bigint[][];
      const output = (await causal.generate({
        ...inputs,
        max_new_tokens: maxNewTokens,
        do_sample: false,
      })) as Tensor;
      const all = (output.tolist() as bigint[][])[0]!.map(Number);
      const promptIds = ids[0]!.map(Number);
      transformers.push({ prompt: promptIds, out: all.slice(promptIds.length) });
    }
  } finally {
    await causal.dispose();
  }

  const pool = await createGenerationPool({
    model: { url: model.dir, engines: ['@kiln/engine-onnxruntime'] },
    settings: { cores: 2, minWorkers: 1, maxWorkers: 1 },
  });
  try {
    const kiln = await Promise.all(
      prompts.map(async (prompt) => {
        const promptTokens =
          typeof prompt === 'string' ? await pool.encode(prompt) : await pool.encodeChat(prompt);
        const output = await pool.predict({ promptTokens, maxNewTokens });
        return {
          prompt: promptTokens,
          out: [...output.tokens],
          ended: output.finishReason === 'eos',
        };
      }),
    );
    return prompts.map((prompt, i) => {
      // Kiln leaves the end-of-sequence token out of its tokens; transformers.js keeps it.
      const [k, kEosInside] = untilEos(kiln[i]!.out, eos);
      const kEnded = kEosInside || kiln[i]!.ended;
      const [t, tEnded] = untilEos(transformers[i]!.out, eos);
      return {
        prompt,
        kilnPrompt: kiln[i]!.prompt,
        transformersPrompt: transformers[i]!.prompt,
        kiln: k,
        transformers: t,
        kilnEnded: kEnded,
        transformersEnded: tEnded,
        same: equal(kiln[i]!.prompt, transformers[i]!.prompt) && equal(k, t) && kEnded === tEnded,
      };
    });
  } finally {
    await pool.shutdown();
  }
}

function addsSpecialTokens(tokenizer: PreTrainedTokenizer): boolean {
  const config = tokenizer as unknown as { add_bos_token?: boolean; add_eos_token?: boolean };
  return Boolean(config.add_bos_token || config.add_eos_token);
}

/**
 * The text encoded (special tokens added) and decoded (special tokens skipped) by
 * transformers.js's AutoTokenizer and by Kiln's loadTextTokenizer.
 */
export async function compareTokenizer(
  root: string,
  model: ParityModel,
  text: string,
): Promise<TokenizerRow> {
  useLocalModels(root);
  const theirs = await AutoTokenizer.from_pretrained(model.id);
  const ours = await loadTextTokenizer(model.dir);
  let started = performance.now();
  const transformersIds = theirs.encode(text);
  const transformersText = theirs.decode(transformersIds, {
    skip_special_tokens: true,
    clean_up_tokenization_spaces: false,
  });
  const transformersMs = performance.now() - started;
  const cleanedUp = theirs.decode(transformersIds, { skip_special_tokens: true });
  started = performance.now();
  const kilnIds = ours.encode(text);
  const kilnText = ours.decode(kilnIds);
  const kilnMs = performance.now() - started;
  let firstDifference = kilnIds.findIndex((id, i) => id !== transformersIds[i]);
  if (firstDifference < 0 && kilnIds.length !== transformersIds.length)
    firstDifference = Math.min(kilnIds.length, transformersIds.length);
  return {
    bytes: Buffer.byteLength(text),
    tokens: kilnIds.length,
    encodeSame: firstDifference < 0,
    firstDifference,
    decodeSame: kilnText === transformersText,
    cleanUpSame: kilnText === cleanedUp,
    kilnRoundTrip: kilnText === text,
    transformersRoundTrip: transformersText === text,
    kilnMs,
    transformersMs,
  };
}
