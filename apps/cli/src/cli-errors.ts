import { KilnError } from '@kiln/core';

/** Exit codes: 0 ok, 1 failure, 2 usage. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A wrong command line: printed with a hint and exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

const HINTS: Partial<Record<string, string>> = {
  MODEL_NOT_FOUND:
    'check the path or URL; model URLs look like name::OnnxRuntime=file:///path/to/model',
  URL_NOT_ALLOWED: 'download the model first and point at the local file or folder',
  ENGINE_UNAVAILABLE:
    'install the engine package (e.g. @kiln/engine-onnxruntime) or name another with engine=',
  SHAPE_MISMATCH: 'run `kiln inspect <model>` to see the input shapes the model expects',
  INVALID_INPUT: 'run `kiln inspect <model>` to see the input names and dtypes the model expects',
  MALFORMED_TENSOR: 'inputs may be .npy, .npz, .safetensors, DJL ndlist, JSON or JPEG/PNG images',
  UNSUPPORTED_FORMAT: 'inputs may be .npy, .npz, .safetensors, DJL ndlist, JSON or JPEG/PNG images',
  INVALID_CONFIG: 'check serving.properties / config.properties and the flags you gave',
  MODEL_LOAD_FAILED: 'run `kiln inspect <model>` to check the model folder',
};

/** A command that printed its own failure: only its exit code is left to return. */
export class ReportedFailure extends Error {
  constructor(readonly exitCode: number) {
    super(`exited with ${exitCode}`);
    this.name = 'ReportedFailure';
  }
}

/** One clear line (plus a hint) for the terminal; the stack only with --verbose. */
export function describeFailure(
  error: unknown,
  verbose: boolean,
): { lines: string[]; exitCode: number } {
  if (error instanceof ReportedFailure) return { lines: [], exitCode: error.exitCode };
  if (error instanceof UsageError) {
    return {
      lines: [`error: ${error.message}`, ...(error.hint ? [`hint: ${error.hint}`] : [])],
      exitCode: EXIT_USAGE,
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  const lines = [`error: ${message.split('\n')[0]}`];
  const rest = message.split('\n').slice(1);
  lines.push(...rest.map((l) => `  ${l.trim()}`));
  // A hint the error carries knows its case better than the one for its code.
  const ownHint = error instanceof KilnError ? error.details?.hint : undefined;
  const hint =
    typeof ownHint === 'string'
      ? ownHint
      : error instanceof KilnError
        ? HINTS[error.code]
        : undefined;
  if (hint) lines.push(`hint: ${hint}`);
  if (verbose && error instanceof Error && error.stack) lines.push(error.stack);
  else if (!(error instanceof KilnError)) lines.push('hint: run again with --verbose for details');
  return { lines, exitCode: EXIT_FAILURE };
}
