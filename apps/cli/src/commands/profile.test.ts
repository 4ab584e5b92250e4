import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { STACK_TRACE, kiln } from '../test-support/run-binary.js';

const run = await ortAvailable();

describe.skipIf(!run).concurrent('kiln profile', () => {
  let models: TestModels;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-profile-');
  });
  afterAll(async () => {
    await models?.remove();
  });

  it('prints the per-layer table and bottlenecks and writes an SVG chart of time per layer', async () => {
    const { code, stdout, stderr } = await kiln(
      ['profile', '-m', models.mlp, '-s', '(8,16)f', '--runs', '5', '--warmup', '1'],
      { cwd: models.root },
    );
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^mlp on OnnxRuntime 1\.\d+\.\d+, inputs \(8,16\)f$/m);
    expect(stdout).toMatch(/^runs 5, mean run [\d.]+ ms/m);
    expect(stdout).toMatch(/^node\s+op\s+total ms\s+calls\s+mean ms\s+share$/m);
    expect(stdout).toMatch(/\s(Gemm|FusedGemm|MatMul)\s+[\d.]+\s+5\s/);
    expect(stdout).toMatch(/^bottlenecks \(half the time\): .+ \(\w+, [\d.]+%\)/m);
    expect(stdout).toMatch(/chart of time per layer: mlp-profile\.svg/);
    const svg = await readFile(path.join(models.root, 'mlp-profile.svg'), 'utf8');
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    const bars = [
      ...svg.matchAll(/<rect class="bar" data-category="([^"]+)"[^>]* data-value="([\d.]+)"/g),
    ];
    expect(bars.length).toBeGreaterThanOrEqual(1);
    expect(bars.every((b) => Number(b[2]) >= 0)).toBe(true);
  });

  it('gives the profile as JSON with the bottlenecks', async () => {
    const chart = path.join(models.root, 'tiny.svg');
    const { code, stdout } = await kiln([
      '--json',
      'profile',
      '-m',
      models.tiny,
      '--runs',
      '3',
      '--chart',
      chart,
    ]);
    expect(code).toBe(0);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({
      model: 'tiny',
      engine: 'OnnxRuntime',
      inputs: '(1,4)f',
      chart,
      profile: { runs: 3 },
    });
    expect(result.profile.nodes.length).toBeGreaterThan(0);
    expect(result.bottlenecks.length).toBeGreaterThan(0);
  });

  it('says clearly that other engines cannot be profiled per layer', async () => {
    const { code, stderr } = await kiln([
      'profile',
      '-m',
      `tiny::PyTorch=${models.tiny}`,
      '--no-chart',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /^error: per-layer profiling is not supported by PyTorch\nhint: .*kiln bench/,
    );
    expect(stderr).not.toMatch(STACK_TRACE);
  });

  it('refuses shapes the model does not take with exit code 1', async () => {
    const wrong = await kiln(['profile', '-m', models.tiny, '-s', '1,5', '--no-chart']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^error: input x is float32\[-1,4\] but float32\[1,5\] was given/);
    expect(wrong.stderr).toMatch(/^hint: run `kiln inspect <model>`/m);
    expect(wrong.stderr).not.toMatch(STACK_TRACE);
  });
});
