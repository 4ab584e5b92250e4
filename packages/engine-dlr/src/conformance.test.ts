import { DTYPES } from '@kiln/core';
import { dlrConformanceFixtures } from '@kiln/testing';
import { describeEngineConformance } from '@kiln/testing/conformance';
import { provider } from './provider.js';
import { probeDlr } from './probe.js';
import { useConformanceLibrary } from './test-support/models.js';

// The shared suite, run against DLR's C API as the conformance library implements it (built
// from native/dlr/test-lib and named by KILN_DLR_LIBRARY, which worker threads inherit).
await useConformanceLibrary();

await describeEngineConformance({
  engineName: 'DLR',
  provider,
  fixtures: dlrConformanceFixtures,
  dtypes: DTYPES.filter((d) => d !== 'string'),
  providerModule: new URL('./index.ts', import.meta.url),
  probe: probeDlr,
});
