import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import {
  KILN_BENCH_BIN,
  STACK_TRACE,
  kiln,
  runBinary,
  spawnKilnServe,
} from '../test-support/run-binary.js';
import { waitFor } from '../test-support/wait-for-output.js';

const run = await ortAvailable();

describe.skipIf(!run).concurrent('kiln predict', () => {
  let models: TestModels;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-predict-');
  });
  afterAll(async () => {
    await models?.remove();
  });

  it('classifies an Iris flower read from stdin', async () => {
    const { code, stdout } = await kiln(
      ['predict', '-m', `iris::OnnxRuntime=file://${models.iris}`, '-i', '-'],
      { input: '[5.1, 3.5, 1.4, 0.2]' },
    );
    expect(code).toBe(0);
    expect(JSON.parse(stdout)[0]).toMatchObject({ className: 'setosa' });
  });

  it('fails with one line for a missing input file, a bad shape and a bad URL', async () => {
    const missing = await kiln([
      'predict',
      '-m',
      models.tiny,
      '-i',
      path.join(models.root, 'nope.npy'),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: cannot read input .*nope\.npy/);
    const shape = await kiln(['predict', '-m', models.tiny, '-i', '-'], { input: '[[1, 2, 3]]' });
    expect(shape.code).toBe(1);
    expect(shape.stderr).toMatch(/^error: .*\[1,3\]/);
    const url = await kiln(['predict', '-m', 'tiny=ftp://example.com/tiny.zip', '-i', '-'], {
      input: '[[1,2,3,4]]',
    });
    expect(url.code).toBe(1);
    expect(url.stderr).toMatch(/^error: model URL ftp:\/\/example\.com\/tiny\.zip is remote/);
    expect(missing.stderr + shape.stderr + url.stderr).not.toMatch(STACK_TRACE);
  });
});

describe.skipIf(!run)('kiln serve measured by kiln-bench over HTTP', () => {
  let models: TestModels;
  let server: ChildProcessWithoutNullStreams;
  let inference: string;
  let management: string;
  let managementToken: string;
  let metrics: string;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-serve-');
    server = spawnKilnServe(['-m', models.tiny, '--model-store', models.root]);
    const listening = waitFor(
      server,
      /inference\s+(http:\/\/\S+)\n\s+management\s+(\S+)\n\s+metrics\s+(http:\/\/\S+)\n/,
      60_000,
    );
    const key = waitFor(server, /management key (\S+)/, 60_000);
    const ready = waitFor(server, /model tiny READY/, 60_000);
    const [, inferenceUrl, managementUrl, metricsUrl] = await listening;
    inference = inferenceUrl!;
    management = managementUrl!;
    metrics = metricsUrl!;
    managementToken = (await key)[1]!;
    await ready;
  });
  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGKILL');
    }
    await models?.remove();
  });

  it('reports a model registered through the management API as it loads', async () => {
    const reported = waitFor(
      server,
      /model again PENDING[^\n]*\n(?:.*\n)*?\s+model again READY/,
      60_000,
    );
    const registered = await fetch(
      `${management}/models?url=${path.basename(models.tiny)}&model_name=again`,
      { method: 'POST', headers: { authorization: `Bearer ${managementToken}` } },
    );
    expect(registered.status).toBe(200);
    await reported;
  });

  it('serves, is measured with the server-side split, and drains on SIGTERM', async () => {
    const bench = await runBinary(KILN_BENCH_BIN, [
      '--server',
      inference,
      '-n',
      'tiny',
      '-s',
      '1,4',
      '--concurrency',
      '1:2:x2',
      '--window',
      '150',
      '--max-windows',
      '3',
      '--metrics',
      metrics,
      '--json',
    ]);
    expect(bench.stderr).toBe('');
    expect(bench.code).toBe(0);
    const result = JSON.parse(bench.stdout);
    expect(result.levels.map((l: { level: number }) => l.level)).toEqual([1, 2]);
    for (const level of result.levels) {
      expect(level.requests).toBeGreaterThan(0);
      expect(level.errors).toBe(0);
      expect(level.server.jobs).toBeGreaterThanOrEqual(level.requests);
    }
    const stopped = waitFor(server, /stopped/, 30_000);
    const exited = new Promise<number | null>((resolve) => server.on('exit', resolve));
    server.kill('SIGTERM');
    await stopped;
    expect(await exited).toBe(0);
  });
});
