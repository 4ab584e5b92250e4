import { DTYPES } from '@kiln/core';
import { onnxConformanceFixtures } from '@kiln/testing';
import { describeEngineConformance } from '@kiln/testing/conformance';
import { provider } from './provider.js';
import { probeOrt } from './probe.js';

await describeEngineConformance({
  engineName: 'OnnxRuntime',
  provider,
  fixtures: onnxConformanceFixtures,
  // onnxruntime-node has no bfloat16 tensors (its metadata refuses ONNX type 16).
  dtypes: DTYPES.filter((d) => d !== 'bfloat16'),
  providerModule: new URL('./index.ts', import.meta.url),
  probe: probeOrt,
});
