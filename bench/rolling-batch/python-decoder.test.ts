import { describe, expect, it } from 'vitest';
import { runBench } from '../harness/run-bench.js';
import { pythonWithTorch } from './python-decoder.js';

const python = pythonWithTorch();
if (!python)
  console.warn('skipping the Python decoder run of bench/rolling-batch: no Python imports torch');

describe.skipIf(!python)('bench/rolling-batch --python', () => {
  it('serves a Llama-style torch step handler with every contender, the same tokens from each', async () => {
    // The GPU kit's step 4 on the CPU, small: the whole path in seconds.
    const stdout = await runBench(
      new URL('./run.ts', import.meta.url),
      [
        ...['--python', '--layers', '2', '--hidden', '64', '--heads', '4', '--kv-heads', '2'],
        ...['--vocab', '256', '--requests', '6', '--rounds', '1', '--device', 'cpu'],
      ],
      180_000,
    );
    expect(stdout).toMatch(/decoder: a Llama-style torch decoder in a Python step handler/);
    expect(stdout).toMatch(/^rolling \(max 16\) vs request-level \(batch 8\), tokens\/s: [\d.]+/m);
    expect(stdout).toMatch(/every contender generated the same tokens for every request: true/);
  });
});
