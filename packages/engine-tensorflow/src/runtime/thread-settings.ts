import { KilnError, KilnErrorCode } from '@kiln/core';
import type { TfRuntimeFacts } from './resolve-runtime.js';

/** Native TensorFlow reads these when it creates its context (once per process, at load). */
export const TF_INTRA_OP_ENV = 'TF_NUM_INTRAOP_THREADS';
export const TF_INTER_OP_ENV = 'TF_NUM_INTEROP_THREADS';

export interface TfThreadOptions {
  /** Threads one op may use (native TensorFlow). */
  readonly intraOpThreads?: number | undefined;
  /** Ops that may run at once (native TensorFlow). */
  readonly interOpThreads?: number | undefined;
}

/**
 * Puts the thread options where native TensorFlow reads them: the process environment (the
 * pool's host threads share it with the process). Checks the values.
 */
export function exportThreadOptions(
  options: TfThreadOptions,
  env: Record<string, string | undefined>,
): void {
  const entries: [string, number | undefined][] = [
    [TF_INTRA_OP_ENV, checkThreads('intraOpThreads', options.intraOpThreads)],
    [TF_INTER_OP_ENV, checkThreads('interOpThreads', options.interOpThreads)],
  ];
  for (const [key, value] of entries) if (value !== undefined) env[key] = String(value);
}

/** Thread counts native TensorFlow uses; undefined leaves TensorFlow's default (one per core). */
export interface NativeThreads {
  readonly intraOp: number | undefined;
  readonly interOp: number | undefined;
}

/** The thread counts in an environment, as TensorFlow reads them. */
export function readThreadEnv(env: Readonly<Record<string, string | undefined>>): NativeThreads {
  const read = (key: string) => {
    const value = Number(env[key]);
    return Number.isInteger(value) && value > 0 ? value : undefined;
  };
  return { intraOp: read(TF_INTRA_OP_ENV), interOp: read(TF_INTER_OP_ENV) };
}

/**
 * How the runtime uses threads, for Engine.describe(): for native TensorFlow the counts it
 * read when it loaded, and a note when options asked for others it could not take.
 */
export function describeThreads(
  facts: TfRuntimeFacts,
  options: TfThreadOptions,
): Record<string, unknown> {
  if (facts.nativeThreads === undefined) {
    return {
      intraOpThreads: 1,
      note: `the ${facts.backend} backend runs each execution on one thread in Node; parallelism comes from more execution contexts (worker threads)`,
    };
  }
  const { intraOp, interOp } = facts.nativeThreads;
  const unmet =
    (options.intraOpThreads !== undefined && options.intraOpThreads !== intraOp) ||
    (options.interOpThreads !== undefined && options.interOpThreads !== interOp);
  const note = unmet
    ? 'thread options were ignored: TensorFlow had already loaded in this process, and reads them once'
    : undefined;
  return {
    intraOpThreads: intraOp ?? 'TensorFlow default (one per core)',
    interOpThreads: interOp ?? 'TensorFlow default (one per core)',
    ...(note === undefined ? {} : { note }),
  };
}

function checkThreads(name: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `TensorFlow ${name} must be a positive integer, got ${value}`,
    );
  }
  return value;
}
