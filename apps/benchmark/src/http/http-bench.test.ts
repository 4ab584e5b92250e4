import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadOrt } from '@kiln/engine-onnxruntime';
import { tinyModel } from '@kiln/model-tools';
import { type KilnServer, loadServerConfig, startKilnServer } from '@kiln/server';
import { checkEngine } from '@kiln/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseShapes } from '../options/shapes.js';
import { runHttpBench } from './http-bench.js';

const { run } = await checkEngine('OnnxRuntime', async () => {
  await loadOrt();
  return null;
});

describe.skipIf(!run)('HTTP benchmark against a real Kiln server on loopback', () => {
  let dir: string;
  let server: KilnServer;
  const windows = { windowMs: 150, maxWindows: 3 };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-bench-http-'));
    const model = await tinyModel(path.join(dir, 'tiny'));
    const config = loadServerConfig({
      env: {},
      overrides: {
        inference_address: 'http://127.0.0.1:0',
        management_address: 'http://127.0.0.1:0',
        metrics_address: 'http://127.0.0.1:0',
        enable_access_log: 'false',
      },
    });
    server = await startKilnServer({
      config,
      models: [model],
      engineModules: ['@kiln/engine-onnxruntime'],
      logger: pino({ level: 'silent' }),
    });
    const deadline = Date.now() + 60_000;
    while (server.models.list()[0]?.state !== 'READY' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(server.models.list()[0]?.state).toBe('READY');
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('sweeps concurrency over /predictions and splits the time with the server metrics', async () => {
    const result = await runHttpBench({
      server: server.urls.inference,
      model: 'tiny',
      protocol: 'predictions',
      inputs: parseShapes('1,4'),
      mode: 'concurrency',
      levels: [1, 2],
      metricsUrl: `${server.urls.metrics}/metrics`,
      ...windows,
    });
    expect(result).toMatchObject({
      kind: 'http',
      model: 'tiny',
      mode: 'concurrency',
      inputs: '(1,4)f',
    });
    expect(result.levels.map((l) => l.level)).toEqual([1, 2]);
    for (const level of result.levels) {
      expect(level.requests).toBeGreaterThan(0);
      expect(level.errors).toBe(0);
      const split = level.server!;
      // The server counted at least the requests of the counted windows.
      expect(split.jobs).toBeGreaterThanOrEqual(level.requests);
      expect(split.meanBatchSize).toBeGreaterThanOrEqual(1);
      expect(split.inference.meanMs).toBeGreaterThan(0);
      // What the client waited for holds what the server spent inferring.
      expect(level.latency.meanMs).toBeGreaterThan(split.inference.meanMs);
    }
  });

  it('speaks the v2 protocol, JSON and binary, and a request rate', async () => {
    const base = {
      server: server.urls.inference,
      model: 'tiny',
      inputs: parseShapes('1,4'),
      inputNames: ['x'],
      ...windows,
    };
    const json = await runHttpBench({ ...base, protocol: 'v2', mode: 'concurrency', levels: [2] });
    const binary = await runHttpBench({
      ...base,
      protocol: 'v2-binary',
      mode: 'rate',
      levels: [50],
    });
    expect(json.levels[0]!.requests).toBeGreaterThan(0);
    expect(binary.levels[0]!.requests).toBeGreaterThan(0);
    expect(binary.levels[0]!.errors).toBe(0);
  });

  it('fails clearly on an unknown model, a wrong shape and an unreachable server', async () => {
    const base = {
      server: server.urls.inference,
      protocol: 'predictions' as const,
      inputs: parseShapes('1,4'),
      mode: 'concurrency' as const,
      levels: [1],
      ...windows,
    };
    await expect(runHttpBench({ ...base, model: 'nope' })).rejects.toThrow(
      /HTTP 404 .*model nope not found/,
    );
    await expect(
      runHttpBench({ ...base, model: 'tiny', inputs: parseShapes('1,5') }),
    ).rejects.toThrow(/HTTP 400/);
    await expect(
      runHttpBench({ ...base, model: 'tiny', server: 'http://127.0.0.1:1', protocol: 'v2' }),
    ).rejects.toThrow(/cannot reach http:\/\/127\.0\.0\.1:1/);
  });
});
