import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { checkEngine } from '@kiln/testing';
import { describe, expect, it } from 'vitest';

const availability = await checkEngine('OnnxRuntime', async () => {
  await createOnnxRuntimeEngine().load();
  return null;
});
const RUN = fileURLToPath(new URL('./run.ts', import.meta.url));

describe.runIf(availability.run)('bench/grpc', () => {
  it('loads one kiln serve over gRPC and HTTP and prints the ratio against its goal', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '-C',
        '@kiln/source',
        '--import',
        'tsx',
        RUN,
        '--seconds',
        '1',
        '--rounds',
        '1',
        '--port',
        '18650',
      ],
      { timeout: 150_000 },
    );
    expect(stdout).toMatch(/grpc ModelInfer\s+[\d.]+ \[/);
    expect(stdout).toMatch(/http v2 binary\s+[\d.]+ \[/);
    expect(stdout).toMatch(/grpc ÷ http: [\d.]+ \[[\d.]+–[\d.]+\]× \(goal ≥ 1×: (meets|misses)\)/);
    expect(stdout).toMatch(/load average [\d.]+ \/ [\d.]+ \/ [\d.]+/);
  }, 180_000);
});
