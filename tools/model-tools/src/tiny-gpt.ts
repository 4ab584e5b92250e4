import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The training script: trains a small GPT with Debian's python3-torch and writes a model folder. */
export const TINY_GPT_SCRIPT = fileURLToPath(
  new URL('../python/train_tiny_gpt.py', import.meta.url),
);
/** Debian's Python, which has python3-torch. */
export const TINY_GPT_PYTHON = '/usr/bin/python3';
/** Where the default training text comes from: Debian's bible-kjv and bible-kjv-text. */
export const KJV_PROGRAM = '/usr/bin/bible';
export const KJV_DATA = '/usr/lib/bible.data';

export interface TinyGptOptions {
  /** Optimizer steps; the script's default (1000) takes 3 to 4 minutes on 2 cores. */
  readonly steps?: number;
  /** BPE merges: the vocabulary is 256 bytes + merges + `<|endoftext|>`. */
  readonly merges?: number;
  readonly layers?: number;
  readonly hidden?: number;
  readonly heads?: number;
  /** n_positions: the longest sequence the model takes. */
  readonly positions?: number;
  readonly seed?: number;
  /** A UTF-8 text to train on instead of the King James Bible. */
  readonly text?: string;
  /** Folder the trained models are kept in, one per script and arguments; the OS temp dir. */
  readonly cacheDir?: string;
  /** Receives the script's progress lines. */
  readonly log?: (line: string) => void;
}

/** What the script records in the folder's training.json. */
export interface TinyGptTraining {
  readonly source: string;
  readonly documents: number;
  readonly tokens: number;
  readonly vocab_size: number;
  readonly steps: number;
  readonly final_loss: number;
  readonly seconds: number;
  readonly sample: { readonly prompt: string; readonly greedy: string };
}

export interface TinyGptModel {
  /** The model folder: model.onnx, vocab.json + merges.txt, config.json, serving.properties. */
  readonly dir: string;
  readonly training: TinyGptTraining;
  /** True when an earlier run's folder was reused. */
  readonly cached: boolean;
}

/** Why Debian's Python cannot train the tiny GPT (no torch), or null when it can. */
export function pythonTorchUnavailable(): string | null {
  const probe = spawnSync(TINY_GPT_PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    return `${TINY_GPT_PYTHON} cannot import torch (apt-get install python3-torch)`;
  return null;
}

/** Why the King James Bible's text cannot be read here, or null when it can. */
export function kjvTextUnavailable(): string | null {
  if (!(existsSync(KJV_PROGRAM) && existsSync(KJV_DATA)))
    return `${KJV_PROGRAM} or ${KJV_DATA} is missing (apt-get install bible-kjv)`;
  return null;
}

/**
 * Why the tiny GPT cannot be trained here (null when it can): Python without torch, or the
 * King James Bible's Debian packages missing when no `text` is given.
 */
export function tinyGptUnavailable(options: Pick<TinyGptOptions, 'text'> = {}): string | null {
  return pythonTorchUnavailable() ?? (options.text ? null : kjvTextUnavailable());
}

function scriptArgs(options: TinyGptOptions): string[] {
  const args: string[] = [];
  const flag = (name: string, value: number | string | undefined) => {
    if (value !== undefined) args.push(`--${name}`, String(value));
  };
  flag('steps', options.steps);
  flag('merges', options.merges);
  flag('layers', options.layers);
  flag('hidden', options.hidden);
  flag('heads', options.heads);
  flag('positions', options.positions);
  flag('seed', options.seed);
  flag('text', options.text);
  return args;
}

/**
 * Trains the tiny GPT (seeded: the same options give the same model) into `dir` by running
 * the script. Rejects with the script's last output when it fails.
 */
export async function writeTinyGpt(dir: string, options: TinyGptOptions = {}): Promise<string> {
  const args = [TINY_GPT_SCRIPT, '--out', dir, ...scriptArgs(options)];
  const child = spawn(TINY_GPT_PYTHON, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    tail = (tail + text).slice(-4000);
    for (const line of text.split('\n'))
      if (/^(step \d+|\d+ documents)/.test(line)) options.log?.(line);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`train_tiny_gpt.py exited with ${code}:\n${tail}`);
  return dir;
}

/**
 * The tiny GPT for these options, trained once and kept under the OS temp dir in a folder
 * named by a hash of the script and the options (and of the text file, when one is given), so
 * that tests and benches share one training run. Concurrent callers may both train; the
 * first folder to land is kept.
 */
export async function trainTinyGpt(options: TinyGptOptions = {}): Promise<TinyGptModel> {
  const hash = createHash('sha256');
  hash.update(readFileSync(TINY_GPT_SCRIPT));
  hash.update(JSON.stringify(scriptArgs(options)));
  if (options.text) hash.update(readFileSync(options.text));
  const dir = join(
    options.cacheDir ?? tmpdir(),
    `kiln-tiny-gpt-${hash.digest('hex').slice(0, 16)}`,
  );
  const cached = await readTraining(dir);
  if (cached) return { dir, training: cached, cached: true };
  const staging = `${dir}.${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await writeTinyGpt(staging, options);
    await rename(staging, dir).catch(async (error: unknown) => {
      // Another run landed first: keep its folder.
      if (!(await readTraining(dir))) throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  const training = await readTraining(dir);
  if (!training) throw new Error(`${dir} has no training.json after training`);
  return { dir, training, cached: false };
}

async function readTraining(dir: string): Promise<TinyGptTraining | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, 'training.json'), 'utf8')) as TinyGptTraining;
  } catch {
    return undefined;
  }
}
