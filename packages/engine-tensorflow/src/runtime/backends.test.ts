import { describe, expect, it } from 'vitest';
import { TF_BACKENDS, TF_BACKEND_ENV, backendPreference } from './backends.js';

describe('backendPreference', () => {
  it('tries every backend, best first, by default', () => {
    expect(backendPreference(undefined, {})).toEqual(['tfjs-node-gpu', 'tfjs-node', 'wasm', 'cpu']);
    expect(backendPreference(undefined, {})).toEqual([...TF_BACKENDS]);
  });

  it('takes one backend or a list from the option', () => {
    expect(backendPreference('cpu', {})).toEqual(['cpu']);
    expect(backendPreference(['wasm', 'cpu', 'wasm'], {})).toEqual(['wasm', 'cpu']);
  });

  it('reads KILN_TENSORFLOW_BACKEND when no option is given; the option wins', () => {
    expect(backendPreference(undefined, { [TF_BACKEND_ENV]: ' tfjs-node , wasm ' })).toEqual([
      'tfjs-node',
      'wasm',
    ]);
    expect(backendPreference('cpu', { [TF_BACKEND_ENV]: 'wasm' })).toEqual(['cpu']);
    expect(backendPreference(undefined, { [TF_BACKEND_ENV]: '' })).toEqual([...TF_BACKENDS]);
  });

  it('refuses unknown names with INVALID_CONFIG listing the known ones', () => {
    expect(() => backendPreference(undefined, { [TF_BACKEND_ENV]: 'webgl' })).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining('tfjs-node-gpu, tfjs-node, wasm, cpu'),
      }),
    );
  });
});
