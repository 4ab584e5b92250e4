// kiln bench --tune on a model with a dynamic sequence axis: the recommended serving.properties
// and config.properties it writes parse, hold every key Kiln declares for them, and kiln serve
// loads the model with them without a warning.
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVING_SETTINGS, checkModelSettings, parseServingProperties } from '@kiln/core';
import { GraphBuilder, attr, writeModelFolder } from '@kiln/model-tools';
import { ortAvailable } from '../test-support/models.js';
import { STACK_TRACE, kiln, spawnKilnServe } from '../test-support/run-binary.js';
import { waitFor } from '../test-support/wait-for-output.js';

const run = await ortAvailable();

/** Keys the tune writes when this Kiln declares them (other work adds them as it lands). */
const declared = (key: string) => SERVING_SETTINGS.some((d) => d.key === key);

describe.skipIf(!run)('kiln bench --tune', () => {
  let root: string;
  let model: string;
  let server: ChildProcessWithoutNullStreams | undefined;

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'kiln-cli-tune-'));
    model = path.join(root, 'seq');
    // `x` [batch, seq] → `y` = x, `total` = Σ x over seq: requests may differ in length.
    const g = new GraphBuilder('seq');
    g.input('x', 'float32', ['batch', 'seq']);
    g.op('Identity', ['x'], {}, { output: 'y' });
    g.op('ReduceSum', ['x', g.int64s('axes', [1])], { keepdims: attr.int(0) }, { output: 'total' });
    g.output('y', 'float32', ['batch', 'seq']);
    g.output('total', 'float32', ['batch']);
    await writeModelFolder(model, g.toModel());
  });
  afterAll(() => {
    if (server && server.exitCode === null) server.kill('SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  it('writes the configuration it recommends, which kiln serve loads without warnings', async () => {
    const saved = path.join(root, 'tuned.properties');
    const config = path.join(root, 'config.properties');
    const { code, stdout, stderr } = await kiln([
      'bench',
      '--tune',
      '-u',
      model,
      '-s',
      '(1,16)f',
      '--workers',
      '1',
      '--batch-sizes',
      '1,2',
      '--delays',
      '1',
      '--window',
      '100',
      '--max-windows',
      '3',
      '--save',
      saved,
      '--save-config',
      config,
    ]);
    expect(code, stderr).toBe(0);
    expect(stderr).not.toMatch(STACK_TRACE);
    expect(stdout).toMatch(/recommended serving\.properties\n[\s\S]*batch_size=\d+/);
    expect(stdout).toContain(`wrote ${saved}`);

    const properties = parseServingProperties(readFileSync(saved, 'utf8'));
    const keys = Object.keys(properties.raw);
    for (const key of ['batch_size', 'max_batch_delay', 'minWorkers', 'maxWorkers'])
      expect(keys).toContain(key);
    expect(keys).toContain('option.intraOpNumThreads');
    expect(properties.raw.batchifier).toMatch(/^(stack|bucket)$/);
    // Batching chosen, the variable-length step ran both batchifiers (seq is dynamic).
    if (properties.raw.batch_size !== '1')
      expect(stdout).toMatch(/batchifier=bucket, lengths 1–16/);
    if (properties.raw.batchifier === 'bucket') {
      expect(properties.raw.bucket_boundaries).toBe('8,16');
      expect(properties.raw.bucket_by).toBe('x');
    }
    expect(keys.includes('warmup_batch_sizes')).toBe(declared('warmup_batch_sizes'));
    if (declared('warmup_batch_sizes'))
      expect(properties.raw.warmup_batch_sizes).toMatch(/^1(,\d+)?$/);
    if (process.platform === 'linux') {
      expect(keys.includes('cpu_pinning')).toBe(declared('cpu_pinning'));
      if (declared('cpu_pinning'))
        expect(readFileSync(config, 'utf8')).toContain(
          `cpu_launcher_enable=${properties.raw.cpu_pinning}`,
        );
    }
    expect(checkModelSettings(properties)).toEqual({ warnings: [], errors: [] });

    copyFileSync(saved, path.join(model, 'serving.properties'));
    server = spawnKilnServe(['-m', model, '-f', config]);
    let output = '';
    server.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor(server, /model seq (READY|FAILED)/, 60_000);
    expect(output).toMatch(/model seq READY/);
    expect(output).not.toMatch(/warning/i);
  });
});
