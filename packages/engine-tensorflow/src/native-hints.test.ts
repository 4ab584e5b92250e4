import { describe, expect, it } from 'vitest';
import { isPackageInstalled } from './runtime/packages.js';
import { createTensorFlowEngine, provider } from './index.js';

// Its own file, so its own thread: the first engine loaded in a thread fixes its tfjs backend.
const nativeInstalled =
  isPackageInstalled('@tensorflow/tfjs-node') || isPackageInstalled('@tensorflow/tfjs-node-gpu');

describe.skipIf(nativeInstalled)('TensorFlow engine without native TensorFlow', () => {
  it('rejects a native-only engine, naming the package to install', async () => {
    await expect(createTensorFlowEngine({ backend: 'tfjs-node' }).load()).rejects.toMatchObject({
      code: 'ENGINE_UNAVAILABLE',
      message: expect.stringContaining('@tensorflow/tfjs-node is not installed'),
    });
  });

  it('says what to install for each native backend it could not load', async () => {
    const description = (await provider.load()).describe();
    expect(description.backend).toBe('wasm');
    expect(description.skipped).toEqual([
      {
        backend: 'tfjs-node-gpu',
        reason: expect.stringContaining('npm install @tensorflow/tfjs-node-gpu'),
      },
      {
        backend: 'tfjs-node',
        reason: expect.stringContaining('npm install @tensorflow/tfjs-node'),
      },
    ]);
  });
});
