import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { openAiErrorBody, openAiFieldError, openAiStreamError } from './openai-error.js';

describe('openAiErrorBody', () => {
  it('types errors by status and codes them by what was thrown', () => {
    const busy = new KilnError(KilnErrorCode.ModelNotReady, 'model gpt is still loading');
    expect(openAiErrorBody(503, busy.message, busy)).toEqual({
      error: {
        message: 'model gpt is still loading',
        type: 'server_error',
        param: null,
        code: 'model_not_ready',
      },
    });
    const missing = new KilnError(KilnErrorCode.ModelNotFound, 'model nope not found');
    expect(openAiErrorBody(404, missing.message, missing).error).toMatchObject({
      type: 'not_found_error',
      param: 'model',
      code: 'model_not_found',
    });
    expect(openAiErrorBody(429, 'slow down', undefined).error).toMatchObject({
      type: 'rate_limit_error',
      code: null,
    });
    expect(openAiErrorBody(500, 'internal server error', new Error('x')).error).toMatchObject({
      type: 'server_error',
      code: null,
    });
    const field = openAiFieldError('echo', 'unsupported_parameter', "'echo' is not supported");
    expect(openAiErrorBody(400, field.message, field).error).toMatchObject({
      type: 'invalid_request_error',
      param: 'echo',
      code: 'unsupported_parameter',
    });
  });

  it('gives a stream error the status its error maps to, without server paths', () => {
    const failed = new KilnError(KilnErrorCode.EngineError, 'failed in /srv/models/gpt/model.onnx');
    expect(openAiStreamError(failed, { overloadStatus: 503, retryAfterS: 1 }).error).toEqual({
      message: 'failed in model.onnx',
      type: 'server_error',
      param: null,
      code: 'engine_error',
    });
  });
});
