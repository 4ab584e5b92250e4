import { KilnError } from '@kiln/core';

/** Exit codes: 0 ok, 1 failure, 2 usage. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A wrong command line: printed with a hint and exit code 2. */
export class BenchUsageError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'BenchUsageError';
  }

  /** A parser's INVALID_INPUT error as a usage error, keeping its hint. */
  static from(error: unknown): BenchUsageError | unknown {
    if (!(error instanceof KilnError)) return error;
    return new BenchUsageError(error.message, hintOf(error));
  }
}

const CODE_HINTS: Partial<Record<string, string>> = {
  MODEL_NOT_FOUND: 'check the path; model URLs look like name::OnnxRuntime=file:///path/to/model',
  URL_NOT_ALLOWED: 'download the model first and point -u at the local file or folder',
  ENGINE_UNAVAILABLE:
    'install the engine package (e.g. @kiln/engine-onnxruntime) or name another with -e',
  SHAPE_MISMATCH: 'run `kiln inspect <model>` to see the input shapes the model expects',
  INVALID_INPUT: 'run `kiln inspect <model>` to see the inputs the model expects',
  MODEL_LOAD_FAILED: 'run `kiln inspect <model>` to check the model folder',
};

function hintOf(error: KilnError): string | undefined {
  const hint = error.details?.hint;
  return typeof hint === 'string' ? hint : CODE_HINTS[error.code];
}

/** One clear line and a hint; the stack only with --verbose. */
export function describeBenchFailure(
  error: unknown,
  verbose: boolean,
): { lines: string[]; exitCode: number } {
  if (error instanceof BenchUsageError) {
    return {
      lines: [`error: ${error.message}`, ...(error.hint ? [`hint: ${error.hint}`] : [])],
      exitCode: EXIT_USAGE,
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  const [first, ...rest] = message.split('\n');
  const lines = [`error: ${first}`, ...rest.map((l) => `  ${l.trim()}`)];
  const hint = error instanceof KilnError ? hintOf(error) : undefined;
  if (hint) lines.push(`hint: ${hint}`);
  if (verbose && error instanceof Error && error.stack) lines.push(error.stack);
  else if (!(error instanceof KilnError)) lines.push('hint: run again with --verbose for details');
  return { lines, exitCode: EXIT_FAILURE };
}
