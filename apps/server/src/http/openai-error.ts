import { KilnError, KilnErrorCode } from '@kiln/core';
import { redactPaths } from '../security/redact-paths.js';
import { type ErrorMappingOptions, toHttpError } from './error-status.js';

/**
 * OpenAI's error body. Its official clients read it to fill their errors (`err.error.message`,
 * `err.type`, `err.param`, `err.code`); without it they report "status code (no body)".
 */
export interface OpenAiErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/** What an OpenAI route adds to a KilnError so that the answer names the field, as OpenAI does. */
interface OpenAiDetails {
  readonly openAiParam?: string;
  readonly openAiCode?: string;
  /** The request field an engine-side error concerns (e.g. `response_format`). */
  readonly param?: string;
}

/**
 * A refused request field, in OpenAI's terms: a 400 naming the field (`param`) with OpenAI's
 * `code` (`invalid_type`, `invalid_value`, `unsupported_parameter`, `unknown_parameter`).
 */
export function openAiFieldError(param: string, code: string, message: string): KilnError {
  const details: OpenAiDetails = { openAiParam: param, openAiCode: code };
  return new KilnError(KilnErrorCode.InvalidInput, message, { details: { ...details } });
}

/** OpenAI's error types by status; other 4xx are invalid requests, 5xx server errors. */
const TYPES: Readonly<Record<number, string>> = {
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
};

/**
 * The OpenAI body of an error answered with `status` and `message` (already safe to show).
 * `error` is what was thrown, when something was: its field and code, or Kiln's code in
 * lower case (`queue_full`, `model_not_ready`), travel as `param` and `code`.
 */
export function openAiErrorBody(status: number, message: string, error?: unknown): OpenAiErrorBody {
  const kiln = error instanceof KilnError ? error : undefined;
  const details = (kiln?.details ?? {}) as OpenAiDetails;
  const modelNotFound = kiln?.code === KilnErrorCode.ModelNotFound;
  return {
    error: {
      message,
      type: TYPES[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
      param: details.openAiParam ?? details.param ?? (modelNotFound ? 'model' : null),
      code:
        details.openAiCode ??
        (modelNotFound ? 'model_not_found' : (kiln?.code.toLowerCase() ?? null)),
    },
  };
}

/**
 * The payload of the event that ends an OpenAI stream a generation error cut short: the body
 * the error would have been answered with before the stream began.
 */
export function openAiStreamError(error: KilnError, options: ErrorMappingOptions): OpenAiErrorBody {
  const mapped = toHttpError(error, options);
  return openAiErrorBody(mapped.status, redactPaths(mapped.message), error);
}
