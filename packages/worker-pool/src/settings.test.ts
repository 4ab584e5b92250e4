import { KilnErrorCode, parseServingProperties } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_GPU_MAX_WORKERS,
  resolveWorkerPoolSettings,
  workerLimitsFor,
  workerPoolSettingsFromProperties,
} from './settings.js';

describe('resolveWorkerPoolSettings', () => {
  it("fills DJL's defaults, with one worker per core at most", () => {
    expect(resolveWorkerPoolSettings({ cores: 4 })).toMatchObject({
      batchSize: 1,
      maxBatchDelayMs: 100,
      jobQueueSize: 1000,
      maxIdleTimeS: 60,
      minWorkers: 1,
      maxWorkers: undefined,
      predictTimeoutMs: undefined,
      threads: undefined,
      pinCores: false,
      workerNice: 5,
      transferInputs: false,
    });
  });

  it.each([
    [{ batchSize: 0 }, /batchSize/],
    [{ batchSize: 1.5 }, /batchSize/],
    [{ maxBatchDelayMs: -1 }, /maxBatchDelayMs/],
    [{ jobQueueSize: 0 }, /jobQueueSize/],
    [{ maxIdleTimeS: Number.NaN }, /maxIdleTimeS/],
    [{ minWorkers: 3, maxWorkers: 2 }, /minWorkers \(3\) must not exceed maxWorkers \(2\)/],
    [{ cores: 0 }, /cores/],
    [{ threads: 0 }, /threads/],
    [{ workerNice: -1 }, /workerNice/],
    [{ workerNice: 20 }, /workerNice must be at most 19/],
    [{ predictTimeoutMs: -5 }, /predictTimeoutMs/],
    [{ perDevice: { tpu: { maxWorkers: 1 } } as never }, /unknown device type/],
    [{ perDevice: { gpu: { maxWorkers: -1 } } }, /gpu.maxWorkers/],
  ])('refuses %o with INVALID_CONFIG', (input, message) => {
    expect(() => resolveWorkerPoolSettings({ cores: 2, ...input })).toThrow(
      expect.objectContaining({
        code: KilnErrorCode.InvalidConfig,
        message: expect.stringMatching(message),
      }),
    );
  });
});

describe('workerLimitsFor', () => {
  it('defaults to one worker per core on cpu and two per GPU', () => {
    const settings = resolveWorkerPoolSettings({ cores: 8, minWorkers: 1 });
    expect(workerLimitsFor(settings, 'cpu')).toEqual({ minWorkers: 1, maxWorkers: 8 });
    expect(workerLimitsFor(settings, 'gpu')).toEqual({
      minWorkers: 1,
      maxWorkers: DEFAULT_GPU_MAX_WORKERS,
    });
    const many = resolveWorkerPoolSettings({ cores: 2, minWorkers: 3 });
    expect(workerLimitsFor(many, 'cpu')).toEqual({ minWorkers: 3, maxWorkers: 3 });
    expect(workerLimitsFor(many, 'gpu')).toEqual({ minWorkers: 3, maxWorkers: 3 });
  });

  it("applies the pool's maxWorkers to every device", () => {
    const settings = resolveWorkerPoolSettings({ cores: 8, maxWorkers: 1 });
    expect(workerLimitsFor(settings, 'cpu')).toEqual({ minWorkers: 1, maxWorkers: 1 });
    expect(workerLimitsFor(settings, 'gpu')).toEqual({ minWorkers: 1, maxWorkers: 1 });
  });

  it('lets cpu. and gpu. limits win', () => {
    const settings = resolveWorkerPoolSettings({
      cores: 8,
      minWorkers: 2,
      maxWorkers: 4,
      perDevice: { cpu: { maxWorkers: 3 }, gpu: { minWorkers: 0, maxWorkers: 1 } },
    });
    expect(workerLimitsFor(settings, 'cpu')).toEqual({ minWorkers: 2, maxWorkers: 3 });
    expect(workerLimitsFor(settings, 'gpu')).toEqual({ minWorkers: 0, maxWorkers: 1 });
  });

  it('refuses a device minimum above its maximum', () => {
    const settings = resolveWorkerPoolSettings({
      cores: 2,
      perDevice: { cpu: { minWorkers: 5, maxWorkers: 2 } },
    });
    expect(() => workerLimitsFor(settings, 'cpu')).toThrow(
      /cpu.minWorkers \(5\) must not exceed cpu.maxWorkers \(2\)/,
    );
  });
});

describe('workerPoolSettingsFromProperties', () => {
  it('reads the pool keys of serving.properties, including cpu./gpu. variants', () => {
    const properties = parseServingProperties(
      [
        'batch_size=8',
        'max_batch_delay=50',
        'job_queue_size=10',
        'max_idle_time=5',
        'minWorkers=2',
        'maxWorkers=4',
        'cpu.minWorkers=1',
        'gpu.maxWorkers=3',
        'worker_nice=0',
      ].join('\n'),
    );
    expect(workerPoolSettingsFromProperties(properties)).toEqual({
      workerNice: 0,
      batchSize: 8,
      maxBatchDelayMs: 50,
      jobQueueSize: 10,
      maxIdleTimeS: 5,
      minWorkers: 2,
      maxWorkers: 4,
      perDevice: { cpu: { minWorkers: 1 }, gpu: { maxWorkers: 3 } },
    });
  });

  it('refuses a worker_nice past 19, naming the key', () => {
    expect(() =>
      workerPoolSettingsFromProperties(parseServingProperties('worker_nice=25\n')),
    ).toThrow(/serving.properties worker_nice must be at most 19 \(got 25\)/);
  });

  it('leaves keys that are not written unset, for other sources to fill', () => {
    expect(
      workerPoolSettingsFromProperties(parseServingProperties('engine=OnnxRuntime\n')),
    ).toEqual({});
  });

  it('refuses a malformed device limit', () => {
    expect(() =>
      workerPoolSettingsFromProperties(parseServingProperties('gpu.maxWorkers=two\n')),
    ).toThrow(expect.objectContaining({ code: KilnErrorCode.InvalidConfig }));
  });
});
