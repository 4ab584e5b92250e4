import { describe, expect, it } from 'vitest';
import { CPU, KilnError } from '@kiln/core';
import { deviceTypeName, parseDlrOptions } from './options.js';

describe('parseDlrOptions', () => {
  it('follows the device Kiln loads on unless option.deviceType says otherwise', () => {
    expect(parseDlrOptions({}, CPU)).toEqual({ deviceType: 1, deviceId: 0, numThreads: undefined });
    expect(parseDlrOptions({}, { type: 'gpu', id: 1 })).toEqual({
      deviceType: 2,
      deviceId: 1,
      numThreads: undefined,
    });
    expect(parseDlrOptions({ deviceType: 'OpenCL', deviceId: '2', numThreads: '4' }, CPU)).toEqual({
      deviceType: 4,
      deviceId: 2,
      numThreads: 4,
    });
    expect(parseDlrOptions({ deviceType: '10' }, CPU).deviceType).toBe(10);
  });

  it.each([
    [{ numThreads: '0' }, 'option.numThreads'],
    [{ numThreads: '1.5' }, 'option.numThreads'],
    [{ numThreads: 'many' }, 'option.numThreads'],
    [{ deviceId: '-1' }, 'option.deviceId'],
    [{ deviceType: 'tpu' }, 'option.deviceType'],
    [{ deviceType: '0' }, 'option.deviceType'],
  ])('refuses %o with INVALID_CONFIG naming the key', (options, key) => {
    let error: unknown;
    try {
      parseDlrOptions(options, CPU);
    } catch (e) {
      error = e;
    }
    expect(KilnError.is(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as Error).message).toContain(key);
  });

  it('names DLPack device types for messages', () => {
    expect(deviceTypeName(1)).toBe('cpu');
    expect(deviceTypeName(2)).toBe('cuda');
    expect(deviceTypeName(12)).toBe('device type 12');
  });
});
