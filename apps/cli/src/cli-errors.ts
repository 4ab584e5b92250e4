import { KilnError, KilnErrorCode } from '@kiln/core';

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

/** What went wrong, as `kiln` reports it: as text for people, as JSON under --json. */
export interface Failure {
  readonly exitCode: number;
  /** A KilnError's code, `USAGE` for a wrong command line, `INTERNAL` for anything else. */
  readonly code: string;
  readonly message: string;
  readonly hint?: string;
  /** Only with --verbose. */
  readonly stack?: string;
}

/** The code of a failure that is the command line's fault. */
export const USAGE_CODE = 'USAGE';

/** A failure with its code and hint (a ReportedFailure has only its exit code left to return). */
export function describeFailure(error: unknown, verbose: boolean): Failure {
  if (error instanceof UsageError) {
    return {
      exitCode: EXIT_USAGE,
      code: USAGE_CODE,
      message: error.message,
      ...(error.hint ? { hint: error.hint } : {}),
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  // A hint the error carries knows its case better than the one for its code.
  const ownHint = error instanceof KilnError ? error.details?.hint : undefined;
  const hint =
    typeof ownHint === 'string'
      ? ownHint
      : error instanceof KilnError
        ? HINTS[error.code]
        : verbose
          ? undefined
          : 'run again with --verbose for details';
  return {
    exitCode: EXIT_FAILURE,
    code: error instanceof KilnError ? error.code : KilnErrorCode.Internal,
    message,
    ...(hint ? { hint } : {}),
    ...(verbose && error instanceof Error && error.stack ? { stack: error.stack } : {}),
  };
}

/** One clear line (plus a hint) for the terminal; the stack only with --verbose. */
export function failureLines(failure: Failure): string[] {
  const [first, ...rest] = failure.message.split('\n');
  return [
    `error: ${first}`,
    ...rest.map((l) => `  ${l.trim()}`),
    ...(failure.hint ? [`hint: ${failure.hint}`] : []),
    ...(failure.stack ? [failure.stack] : []),
  ];
}

/** The failure as one line of JSON (for --json): `{"error":{"code","message","hint"?}}`. */
export function failureJson(failure: Failure): string {
  const { exitCode: _exitCode, ...error } = failure;
  return JSON.stringify({ error });
}
