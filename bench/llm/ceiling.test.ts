import { probeOrt } from '@kiln/engine-onnxruntime';
import { kjvTextUnavailable, pythonTorchUnavailable } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { describe, expect, it } from 'vitest';
import { runBench } from '../harness/run-bench.js';

const { run: ort } = await checkEngine('OnnxRuntime', probeOrt);
const missing = pythonTorchUnavailable() ?? kjvTextUnavailable();
if (missing) console.warn(`skipping the LLM ceiling bench's run: ${missing}`);

describe.skipIf(!ort || missing !== null)('bench/llm/ceiling', () => {
  it('measures run costs, prints each ceiling and Kiln against them from the same round', async () => {
    // A one-layer decoder and a handful of short requests: the whole path, in seconds.
    const stdout = await runBench(
      new URL('./ceiling.ts', import.meta.url),
      [
        ...['--layers', '1', '--hidden', '64', '--heads', '4', '--kv-heads', '2'],
        ...['--vocab', '1000', '--max-len', '128', '--threads', '1'],
        ...['--rounds', '1', '--runs', '1', '--rows', '1,2', '--pasts', '4,16', '--prompts', '4,8'],
        ...['--requests', '4', '--prompt-min', '4', '--prompt-max', '8'],
        ...['--output-min', '4', '--output-max', '12', '--concurrency', '2'],
      ],
      180_000,
    );
    const tokensPerS = (shape: string) =>
      Number(new RegExp(`rolling c2, ${shape}\\s+([\\d.]+) \\[`).exec(stdout)?.[1]);
    for (const shape of ['padded', 'split', 'ragged'])
      expect(stdout).toMatch(
        new RegExp(`rolling c2, ${shape}\\s+[\\d.]+ .*÷ one at a time [\\d.]+`),
      );
    // Splitting may only help, and charging each row its own past never costs more.
    expect(tokensPerS('split')).toBeGreaterThanOrEqual(tokensPerS('padded') * 0.999);
    expect(tokensPerS('ragged')).toBeGreaterThanOrEqual(tokensPerS('padded') * 0.999);
    const kiln = /kiln in process ([\d.]+) \[.*÷ the padded ceiling [\d.]+/.exec(stdout);
    expect(Number(kiln?.[1])).toBeGreaterThan(0);
    // The same ceilings on runs that fetch only logits and new positions, as Kiln runs them.
    expect(stdout).toMatch(/decode run fetching new positions, ms/);
    expect(stdout).toMatch(
      /rolling c2, padded [\d.]+ \[.*÷ the padded ceiling fetching presents [\d.]+/,
    );
    expect(stdout).toMatch(/kiln in process ÷ this padded ceiling [\d.]+/);
  });
});
