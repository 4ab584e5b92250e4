import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';
import { MAX_SWEEP_LEVELS, parseSweep } from './sweep.js';

describe('parseSweep', () => {
  const limits = { max: 4096 };

  it('multiplies, adds and lists as perf_analyzer ranges do', () => {
    expect(parseSweep('1:64:x2', 'c', limits)).toEqual([1, 2, 4, 8, 16, 32, 64]);
    expect(parseSweep('1:10:*3', 'c', limits)).toEqual([1, 3, 9]);
    expect(parseSweep('2:8:+2', 'c', limits)).toEqual([2, 4, 6, 8]);
    expect(parseSweep('1:4:2', 'c', limits)).toEqual([1, 3]);
    expect(parseSweep('3:5', 'c', limits)).toEqual([3, 4, 5]);
    expect(parseSweep('1, 2,8', 'c', limits)).toEqual([1, 2, 8]);
    expect(parseSweep('16', 'c', limits)).toEqual([16]);
  });

  it('keeps rounded levels distinct and reads fractional rates when allowed', () => {
    expect(parseSweep('1:4:x1.5', 'c', limits)).toEqual([1, 2, 3]);
    expect(parseSweep('0.5:2:x2', 'rate', { max: 100, min: 0.1, fractional: true })).toEqual([
      0.5, 1, 2,
    ]);
  });

  it.each([
    ['0:4:x2', /outside 1\.\.4096/],
    ['1:5000', /outside/],
    ['8:2', /end is below the start/],
    ['1:8:x1', /must be \+N/],
    ['1:8:+0', /must be \+N/],
    ['1:8:+1.5', /whole number/],
    ['1:2:3:4', /start:end/],
    ['a,b', /not a number/],
    ['1.5', /not a number/],
  ])('refuses %j', (text, message) => {
    expect(() => parseSweep(text, '--concurrency', limits)).toThrow(message);
  });

  it('bounds how many levels a sweep may hold', () => {
    expect(() => parseSweep('1:1000:+1', '--concurrency', limits)).toThrow(
      `more than ${MAX_SWEEP_LEVELS} levels`,
    );
  });
});

describe('parseDuration', () => {
  it('reads units, and bare numbers as minutes like djl-bench', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('1.5m')).toBe(90_000);
    expect(parseDuration('2')).toBe(120_000);
    expect(parseDuration('1h')).toBe(3_600_000);
  });

  it('refuses nonsense, zero and more than a day', () => {
    expect(() => parseDuration('soon')).toThrow(/bad duration/);
    expect(() => parseDuration('0s')).toThrow(/above 0/);
    expect(() => parseDuration('25h')).toThrow(/at most 24h/);
  });

  it('formats for reports', () => {
    expect(formatDuration(250)).toBe('250ms');
    expect(formatDuration(1500)).toBe('1.5s');
    expect(formatDuration(90_000)).toBe('1.5m');
  });
});
