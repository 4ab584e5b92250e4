import { isDType, parseDevice } from '@kiln/core';
import { torchscriptConformanceFixtures } from '@kiln/testing';
import { describeEngineConformance } from '@kiln/testing/conformance';
import { libtorch } from './native.js';
import { probeLibTorch } from './probe.js';
import { provider } from './provider.js';
import { saveScriptModule } from './script-module.js';

// Dtypes this LibTorch holds (uint16/32/64 only from LibTorch 2.3; never strings).
const dtypes =
  (await probeLibTorch()) === null ? libtorch().runtimeInfo().dtypes.filter(isDType) : [];

await describeEngineConformance({
  engineName: 'PyTorch',
  provider,
  fixtures: torchscriptConformanceFixtures(saveScriptModule),
  dtypes,
  providerModule: new URL('./index.ts', import.meta.url),
  probe: probeLibTorch,
  // The same suite on a GPU (bench/gpu/run.sh sets cuda:0); the CPU otherwise.
  device: parseDevice(process.env.KILN_CONFORMANCE_DEVICE || 'cpu'),
});
