import { afterAll, beforeAll, describe } from 'vitest';
import { tfjsConformanceFixtures } from '@kiln/testing';
import { describeEngineConformance } from '@kiln/testing/conformance';
import {
  TF_BACKEND_ENV,
  type TfBackendName,
  createTensorFlowEngine,
  probeTensorFlow,
} from '../index.js';

/** The dtypes TensorFlow.js holds; every other dtype is UNSUPPORTED_DTYPE (dtypes.test.ts). */
const TFJS_DTYPES = ['float32', 'int32', 'bool', 'string'] as const;

/**
 * The engine conformance suite on one JavaScript backend. tfjs holds one backend per thread,
 * and engines run in the thread that loads them, so each backend has a test file (a thread)
 * of its own. The worker-thread test loads the default provider from index.ts, so the backend
 * reaches it through KILN_TENSORFLOW_BACKEND.
 */
export function describeBackendConformance(backend: TfBackendName): void {
  describe(`${backend} backend`, async () => {
    const previous = process.env[TF_BACKEND_ENV];
    beforeAll(() => {
      process.env[TF_BACKEND_ENV] = backend;
    });
    afterAll(() => {
      if (previous === undefined) delete process.env[TF_BACKEND_ENV];
      else process.env[TF_BACKEND_ENV] = previous;
    });
    await describeEngineConformance({
      engineName: 'TensorFlow',
      provider: createTensorFlowEngine({ backend }),
      fixtures: tfjsConformanceFixtures,
      dtypes: TFJS_DTYPES,
      providerModule: new URL('../index.ts', import.meta.url),
      probe: () => probeTensorFlow(backend),
    });
  });
}
