import { readFileSync } from 'node:fs';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { HttpBenchOptions } from '../http/http-bench.js';
import type { InProcessBenchOptions } from '../inprocess/in-process-bench.js';
import type { InputFile } from '../inputs/bench-input.js';
import { PROTOCOLS, type Protocol, mediaTypeOf } from '../inputs/http-bodies.js';
import { parseDuration } from '../options/duration.js';
import { parseShapes } from '../options/shapes.js';
import { parseSweep } from '../options/sweep.js';
import type { TuneOptions } from '../tune/tune.js';
import { BenchUsageError } from './bench-errors.js';

/** The flags as commander hands them over (strings until checked here). */
export interface RawBenchFlags {
  modelUrl?: string;
  engine?: string;
  inputShapes?: string;
  input?: string;
  contentType?: string;
  iteration: string;
  duration?: string;
  threads: string;
  warmup: string;
  concurrency?: string;
  batchSize: string;
  maxBatchDelay: string;
  intraOpThreads?: string;
  option: string[];
  server?: string;
  modelName?: string;
  modelVersion?: string;
  protocol: string;
  rate?: string;
  inputNames?: string;
  metrics?: string;
  window: string;
  maxWindows: string;
  timeout: string;
  tune?: boolean;
  latencyBudget?: string;
  batchSizes?: string;
  delays?: string;
  workers?: string;
  save?: string;
  saveConfig?: string;
  json?: string | boolean;
  csv?: string;
  html?: string;
  verbose?: boolean;
}

export interface BenchOutputs {
  /** `true`: JSON on stdout instead of the table. */
  readonly json: string | true | undefined;
  readonly csv: string | undefined;
  readonly html: string | undefined;
  /** --tune: where the recommended serving.properties is written. */
  readonly save?: string | undefined;
  /** --tune: where the recommended config.properties lines are written. */
  readonly saveConfig?: string | undefined;
}

export type BenchPlan =
  | {
      readonly kind: 'in-process';
      readonly options: InProcessBenchOptions;
      readonly outputs: BenchOutputs;
    }
  | { readonly kind: 'http'; readonly options: HttpBenchOptions; readonly outputs: BenchOutputs }
  | { readonly kind: 'tune'; readonly options: TuneOptions; readonly outputs: BenchOutputs };

const MAX_CONCURRENCY = 4096;
const MAX_RATE = 100_000;

/** Checks the flags and turns them into one of the three runs; a bad flag is a usage error. */
export function planBench(flags: RawBenchFlags): BenchPlan {
  // An unreadable input file is a failure (exit 1), not a wrong command line.
  const inputFile =
    flags.input === undefined ? undefined : readInputFile(flags.input, flags.contentType);
  try {
    return parsePlan(flags, inputFile);
  } catch (error) {
    throw BenchUsageError.from(error);
  }
}

function parsePlan(flags: RawBenchFlags, inputFile: InputFile | undefined): BenchPlan {
  const outputs: BenchOutputs = {
    json: flags.json === true ? true : typeof flags.json === 'string' ? flags.json : undefined,
    csv: flags.csv,
    html: flags.html,
    save: flags.save,
    saveConfig: flags.saveConfig,
  };
  if (!flags.tune && (flags.save || flags.saveConfig))
    usage('--save and --save-config write what --tune recommends: add --tune');
  if (flags.modelUrl && flags.server)
    usage('give either -u (run the model here) or --server (measure a running server), not both');
  if (!flags.modelUrl && !flags.server)
    usage(
      'nothing to benchmark: give -u <model url> or --server <url>',
      'e.g. kiln-bench -u ./models/resnet18 -s 1,3,224,224 -c 100',
    );
  const inputs = flags.inputShapes === undefined ? undefined : parseShapes(flags.inputShapes);
  if (inputs && flags.input)
    usage('give either -s (synthetic inputs) or -i (an input file), not both');
  const windowMs = parseDuration(withUnit(flags.window));
  const maxWindows = integer('--max-windows', flags.maxWindows, 3, 1000);

  if (flags.server) {
    if (flags.tune)
      usage('--tune runs the model in this process: give -u <model url> instead of --server');
    if (!flags.modelName) usage('--server needs the model name: -n <name>');
    if (!(PROTOCOLS as readonly string[]).includes(flags.protocol))
      usage(`--protocol must be one of ${PROTOCOLS.join(', ')}`);
    if (flags.rate && flags.concurrency) usage('give either --concurrency or --rate, not both');
    const mode = flags.rate ? 'rate' : 'concurrency';
    const levels = flags.rate
      ? parseSweep(flags.rate, '--rate', { max: MAX_RATE, fractional: true, min: 0.1 })
      : parseSweep(flags.concurrency ?? '1:16:x2', '--concurrency', { max: MAX_CONCURRENCY });
    return {
      kind: 'http',
      outputs,
      options: {
        server: flags.server,
        model: flags.modelName,
        version: flags.modelVersion,
        protocol: flags.protocol as Protocol,
        inputs,
        inputNames: flags.inputNames?.split(',').map((n) => n.trim()),
        inputFile,
        mode,
        levels,
        windowMs,
        maxWindows,
        metricsUrl: flags.metrics,
        timeoutMs: parseDuration(withUnit(flags.timeout)),
      },
    };
  }

  const modelUrl = flags.modelUrl!;
  const overrides = parseOverrides(flags.option);
  const intraOp =
    flags.intraOpThreads === undefined
      ? undefined
      : integer('--intra-op-threads', flags.intraOpThreads, 1, 1024);
  if (flags.rate) usage('--rate measures a running server: give --server');
  if (flags.tune) {
    return {
      kind: 'tune',
      outputs,
      options: {
        url: modelUrl,
        engine: flags.engine,
        overrides,
        inputs,
        inputFile,
        latencyBudgetMs:
          flags.latencyBudget === undefined
            ? undefined
            : positive('--latency-budget', flags.latencyBudget),
        batchSizes:
          flags.batchSizes === undefined
            ? undefined
            : parseSweep(flags.batchSizes, '--batch-sizes', { max: 1024 }),
        delaysMs:
          flags.delays === undefined
            ? undefined
            : parseSweep(flags.delays, '--delays', { min: 0, max: 60_000 }),
        workers:
          flags.workers === undefined
            ? undefined
            : parseSweep(flags.workers, '--workers', { max: 256 }),
        maxConcurrency:
          flags.concurrency === undefined
            ? undefined
            : integer('--concurrency', flags.concurrency, 1, MAX_CONCURRENCY),
        windowMs,
        maxWindows,
      },
    };
  }
  return {
    kind: 'in-process',
    outputs,
    options: {
      url: modelUrl,
      engine: flags.engine,
      inputs,
      inputFile,
      iterations: integer('-c', flags.iteration, 1, 100_000_000),
      durationMs: flags.duration === undefined ? undefined : parseDuration(flags.duration),
      workers: integer('-t', flags.threads, -1024, 1024),
      warmup: integer('-w', flags.warmup, 0, 1_000_000),
      concurrency:
        flags.concurrency === undefined
          ? undefined
          : integer('--concurrency', flags.concurrency, 1, MAX_CONCURRENCY),
      batchSize: integer('--batch-size', flags.batchSize, 1, 1024),
      maxBatchDelayMs: integer('--max-batch-delay', flags.maxBatchDelay, 0, 60_000),
      threads: intraOp,
      overrides,
    },
  };
}

/** `--window 500` means milliseconds; a unit may be given (`2s`). */
function withUnit(text: string): string {
  return /^\s*\d+(\.\d+)?\s*$/.test(text) ? `${text.trim()}ms` : text;
}

function readInputFile(file: string, contentType: string | undefined): InputFile {
  let body: Uint8Array;
  try {
    body = readFileSync(file);
  } catch (error) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `cannot read input ${file}: ${(error as Error).message}`,
    );
  }
  return { name: path.basename(file), body, contentType: contentType ?? mediaTypeOf(file) };
}

export function parseOverrides(pairs: readonly string[]): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0)
      usage(`--option ${pair} is not key=value`, 'e.g. --option option.intraOpNumThreads=1');
    overrides[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return overrides;
}

function integer(flag: string, text: string, min: number, max: number): number {
  const value = /^\s*-?\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max)
    usage(`${flag} ${JSON.stringify(text)} must be a whole number from ${min} to ${max}`);
  return value;
}

function positive(flag: string, text: string): number {
  const value = Number(text);
  if (!/^\s*\d+(\.\d+)?\s*$/.test(text) || !(value > 0))
    usage(`${flag} ${JSON.stringify(text)} must be a number above 0`);
  return value;
}

function usage(message: string, hint?: string): never {
  throw new BenchUsageError(message, hint);
}
