import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { checkEngine } from '@kiln/testing';
import { describe, expect, it } from 'vitest';
import { runBench } from '../harness/run-bench.js';

const availability = await checkEngine('OnnxRuntime', async () => {
  await createOnnxRuntimeEngine().load();
  return null;
});

describe.runIf(availability.run)('bench/server', () => {
  it('runs Kiln, the naive server and the floor on the same answers and prints ratios against goals', async () => {
    const stdout = await runBench(
      new URL('./run.ts', import.meta.url),
      ['--only', 'mlp', '--seconds', '1', '--rounds', '1', '--no-ping'],
      120_000,
    );
    expect(stdout).toMatch(/naive koa\+ort\s+[\d.]+ \[/);
    // The floor (Kiln's design written bare) answers the same numbers, or the run stops.
    expect(stdout).toMatch(/floor\s+[\d.]+ \[/);
    expect(stdout).toMatch(/kiln defaults ÷ floor: [\d.]+ \[[\d.]+–[\d.]+\]× \(goal ≥ 0.8×/);
    expect(stdout).toMatch(
      /kiln defaults ÷ naive: [\d.]+ \[[\d.]+–[\d.]+\]× \(goal ≥ 2.5×: (meets|misses)\)/,
    );
    // Main-thread CPU a request, read from /proc for each server of one process.
    expect(stdout).toMatch(/main-thread CPU a request, µs \(from \/proc\): kiln defaults [\d.]+/);
    expect(stdout).toMatch(
      /main-thread CPU a request, kiln defaults ÷ floor: [\d.]+ .*goal ≤ 1.3×/,
    );
    expect(stdout).toMatch(/load average [\d.]+ \/ [\d.]+ \/ [\d.]+/);
  }, 150_000);
});
