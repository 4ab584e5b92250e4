import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '../errors.js';
import {
  MAX_SERVING_PROPERTIES_BYTES,
  SERVING_DEFAULTS,
  mergeServingProperties,
  parseServingProperties,
  readServingProperties,
  servingPropertiesFrom,
} from './serving-properties.js';

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return error instanceof KilnError ? error.code : 'not a KilnError';
  }
  return undefined;
}

describe('parseServingProperties', () => {
  it('gives DJL defaults for an empty file', () => {
    const p = parseServingProperties('');
    expect(p).toMatchObject({
      jobQueueSize: 1000,
      batchSize: 1,
      maxBatchDelayMs: 100,
      maxIdleTimeS: 60,
      engine: undefined,
      translatorFactory: undefined,
      loadOnDevices: undefined,
      minWorkers: undefined,
      maxWorkers: undefined,
      options: {},
    });
    expect(SERVING_DEFAULTS).toEqual({
      jobQueueSize: 1000,
      batchSize: 1,
      maxBatchDelayMs: 100,
      maxIdleTimeS: 60,
    });
  });

  it('reads Java properties syntax: comments, = : and blank separators', () => {
    const p = parseServingProperties(
      [
        '# a comment',
        '! another comment',
        'engine=PyTorch',
        'batch_size : 8',
        'max_batch_delay 250',
        '   job_queue_size=50',
        'translatorFactory=ai.djl.Foo',
        'load_on_devices=gpu0;gpu1',
        'minWorkers=2',
        'maxWorkers=4',
        'max_idle_time=5',
      ].join('\n'),
    );
    expect(p).toMatchObject({
      engine: 'PyTorch',
      batchSize: 8,
      maxBatchDelayMs: 250,
      jobQueueSize: 50,
      translatorFactory: 'ai.djl.Foo',
      loadOnDevices: 'gpu0;gpu1',
      minWorkers: 2,
      maxWorkers: 4,
      maxIdleTimeS: 5,
    });
    expect(Object.keys(p.raw)).not.toContain('# a comment');
  });

  it('joins continuation lines and decodes unicode and other escapes', () => {
    const p = parseServingProperties(
      [
        'option.extraFiles=a.txt,\\',
        '    b.txt',
        'option.label=caf\\u00e9\\tbar',
        'key\\ with\\ spaces=1',
        'option.eq\\=key=v',
      ].join('\r\n'),
    );
    expect(p.options.extraFiles).toBe('a.txt,b.txt');
    expect(p.options.label).toBe('café\tbar');
    expect(p.raw['key with spaces']).toBe('1');
    expect(p.options['eq=key']).toBe('v');
  });

  it('passes option.* keys to the engine without the prefix', () => {
    const p = parseServingProperties(
      'option.intraOpNumThreads=2\noption.mapLocation=true\noptionNot=1\noption.=x',
    );
    expect(p.options).toEqual({ intraOpNumThreads: '2', mapLocation: 'true', '': 'x' });
  });

  it('keeps odd keys as plain keys', () => {
    const p = parseServingProperties('option.__proto__=x\noption.constructor=y');
    expect(Object.getPrototypeOf(p.options)).toBe(Object.prototype);
    expect(p.options.constructor).toBe('y');
    expect(p.engine).toBeUndefined();
  });

  it('trims names and treats blank ones as unset', () => {
    const p = parseServingProperties('engine=OnnxRuntime   \ntranslatorFactory=\nminWorkers=');
    expect(p.engine).toBe('OnnxRuntime');
    expect(p.translatorFactory).toBeUndefined();
    expect(p.minWorkers).toBeUndefined();
  });

  it('ignores a byte-order mark', () => {
    expect(parseServingProperties('\uFEFFengine=PyTorch').engine).toBe('PyTorch');
  });

  it.each([
    'batch_size=abc',
    'batch_size=0',
    'batch_size=1.5',
    'batch_size=1e3',
    'batch_size=0x10',
    'batch_size=-1',
    'job_queue_size=0',
    'max_batch_delay=-5',
    'max_idle_time=ten',
    'minWorkers=two',
    'maxWorkers=99999999999999999999',
  ])('refuses %s with INVALID_CONFIG', (text) => {
    expect(codeOf(() => parseServingProperties(text))).toBe(KilnErrorCode.InvalidConfig);
  });

  it('accepts zero where zero makes sense and a leading plus', () => {
    const p = parseServingProperties(
      'max_batch_delay=0\nmax_idle_time=0\nminWorkers=0\nbatch_size=+4',
    );
    expect(p).toMatchObject({ maxBatchDelayMs: 0, maxIdleTimeS: 0, minWorkers: 0, batchSize: 4 });
  });
});

describe('mergeServingProperties', () => {
  it('lets later layers win and skips undefined values', () => {
    const file = parseServingProperties(
      'engine=PyTorch\nbatch_size=4\noption.intraOpNumThreads=1\noption.keep=yes',
    );
    const merged = mergeServingProperties(
      file,
      { batch_size: '8', 'option.intraOpNumThreads': '2' },
      undefined,
      { engine: 'OnnxRuntime', load_on_devices: undefined },
    );
    expect(merged).toMatchObject({ engine: 'OnnxRuntime', batchSize: 8, loadOnDevices: undefined });
    expect(merged.options).toEqual({ intraOpNumThreads: '2', keep: 'yes' });
    expect(file.batchSize).toBe(4);
  });

  it('validates overrides like the file', () => {
    const file = servingPropertiesFrom({});
    expect(codeOf(() => mergeServingProperties(file, { batch_size: 'many' }))).toBe(
      KilnErrorCode.InvalidConfig,
    );
  });
});

describe('readServingProperties', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-props-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('gives defaults when the folder has no serving.properties', async () => {
    const p = await readServingProperties(dir);
    expect(p).toMatchObject({ batchSize: 1, jobQueueSize: 1000, raw: {} });
  });

  it('reads the file beside the model', async () => {
    await writeFile(path.join(dir, 'serving.properties'), 'engine=OnnxRuntime\nbatch_size=3\n');
    expect(await readServingProperties(dir)).toMatchObject({ engine: 'OnnxRuntime', batchSize: 3 });
  });

  it('reports invalid numbers as INVALID_CONFIG', async () => {
    await writeFile(path.join(dir, 'serving.properties'), 'max_batch_delay=soon');
    await expect(readServingProperties(dir)).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
  });

  it('refuses a serving.properties that is a folder or too large', async () => {
    await mkdir(path.join(dir, 'serving.properties'));
    await expect(readServingProperties(dir)).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
    await rm(path.join(dir, 'serving.properties'), { recursive: true });
    await writeFile(
      path.join(dir, 'serving.properties'),
      Buffer.alloc(MAX_SERVING_PROPERTIES_BYTES + 1, 0x61),
    );
    await expect(readServingProperties(dir)).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
  });
});
