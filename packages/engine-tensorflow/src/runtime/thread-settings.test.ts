import { describe, expect, it } from 'vitest';
import type { TfRuntimeFacts } from './resolve-runtime.js';
import {
  TF_INTER_OP_ENV,
  TF_INTRA_OP_ENV,
  describeThreads,
  exportThreadOptions,
  readThreadEnv,
} from './thread-settings.js';

const native: TfRuntimeFacts = {
  backend: 'tfjs-node',
  packageName: '@tensorflow/tfjs-node',
  packageVersion: '4.22.0',
  tfjsVersion: '4.22.0',
  gpu: false,
  simd: undefined,
  multithreaded: true,
  nativeThreads: { intraOp: 1, interOp: 2 },
  skipped: [{ backend: 'tfjs-node-gpu', reason: 'not installed' }],
};

describe('TensorFlow thread settings', () => {
  it('puts the options in the environment native TensorFlow reads', () => {
    const env: Record<string, string | undefined> = {};
    exportThreadOptions({ intraOpThreads: 1, interOpThreads: 2 }, env);
    expect(env).toEqual({ [TF_INTRA_OP_ENV]: '1', [TF_INTER_OP_ENV]: '2' });
    expect(readThreadEnv(env)).toEqual({ intraOp: 1, interOp: 2 });
  });

  it('reads only positive integers back from the environment', () => {
    expect(readThreadEnv({ [TF_INTRA_OP_ENV]: 'many' })).toEqual({
      intraOp: undefined,
      interOp: undefined,
    });
  });

  it('describes what TensorFlow read when it loaded, and notes options it could not take', () => {
    expect(describeThreads(native, { intraOpThreads: 1 })).toEqual({
      intraOpThreads: 1,
      interOpThreads: 2,
    });
    expect(describeThreads(native, { intraOpThreads: 4 })).toMatchObject({
      intraOpThreads: 1,
      note: expect.stringContaining('already loaded'),
    });
    expect(
      describeThreads({ ...native, nativeThreads: { intraOp: undefined, interOp: undefined } }, {}),
    ).toEqual({
      intraOpThreads: expect.stringContaining('default'),
      interOpThreads: expect.stringContaining('default'),
    });
  });

  it('refuses thread counts that are not positive integers', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => exportThreadOptions({ intraOpThreads: bad }, {})).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }),
      );
    }
  });

  it('describes the JavaScript backends as one thread per execution', () => {
    const wasm = {
      ...native,
      backend: 'wasm' as const,
      multithreaded: false,
      nativeThreads: undefined,
    };
    expect(describeThreads(wasm, {})).toMatchObject({
      intraOpThreads: 1,
      note: expect.stringContaining('more execution contexts'),
    });
  });
});
