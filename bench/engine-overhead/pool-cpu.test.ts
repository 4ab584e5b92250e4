import { fileURLToPath } from 'node:url';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { checkEngine } from '@kiln/testing';
import { describe, expect, it } from 'vitest';
import { runBench } from '../harness/run-bench.js';

const availability = await checkEngine('OnnxRuntime', async () => {
  await createOnnxRuntimeEngine().load();
  return null;
});
const TREE = fileURLToPath(new URL('../..', import.meta.url));

describe.runIf(availability.run && process.platform === 'linux')(
  'bench/engine-overhead pool-cpu',
  () => {
    it("prints each thread's CPU a request, and this tree ÷ another build from the same rounds", async () => {
      // This tree against itself: the comparison runs, and its ratios sit around 1.
      const stdout = await runBench(
        new URL('./pool-cpu.ts', import.meta.url),
        ['--rounds', '1', '--requests', '3000', '--against', TREE],
        120_000,
      );
      expect(stdout).toMatch(
        /this tree: [\d.]+ \[[\d.]+–[\d.]+\] req\/s; CPU µs a request: main thread [\d.]+ .*host thread [\d.]+/,
      );
      expect(stdout).toMatch(/this ÷ against, same rounds: req\/s [\d.]+ .*main thread µs [\d.]+/);
      expect(stdout).toMatch(/load average [\d.]+ \/ [\d.]+ \/ [\d.]+/);
    }, 150_000);
  },
);
