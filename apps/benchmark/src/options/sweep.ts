import { KilnError, KilnErrorCode } from '@kiln/core';

/** Most levels one sweep may hold. */
export const MAX_SWEEP_LEVELS = 64;

export interface SweepLimits {
  /** Smallest level allowed (default 1). */
  readonly min?: number;
  /** Largest level allowed. */
  readonly max: number;
  /** Whether levels may have fractions (request rates); default whole numbers only. */
  readonly fractional?: boolean;
}

/**
 * Parses a sweep as perf_analyzer writes ranges: `start:end:x2` (multiply), `start:end:+4` or
 * `start:end:4` (add), `start:end` (add 1), a list `1,2,8`, or one value. Levels come back
 * in the order given, within the limits, at most 64 of them.
 */
export function parseSweep(text: string, what: string, limits: SweepLimits): number[] {
  const fail = (why: string) =>
    new KilnError(KilnErrorCode.InvalidInput, `bad ${what} ${JSON.stringify(text)}: ${why}`, {
      details: { hint: `${what} looks like 1:64:x2, 1:8:+1, 1,2,4 or 8` },
    });
  const number = (part: string) => {
    const value = Number(part.trim());
    const pattern = limits.fractional ? /^\s*\d+(\.\d+)?\s*$/ : /^\s*\d+\s*$/;
    if (!pattern.test(part) || !Number.isFinite(value))
      throw fail(`${JSON.stringify(part)} is not a number`);
    if (value < (limits.min ?? 1) || value > limits.max) {
      throw fail(`${value} is outside ${limits.min ?? 1}..${limits.max}`);
    }
    return value;
  };
  const levels: number[] = [];
  const push = (value: number) => {
    if (levels.length >= MAX_SWEEP_LEVELS)
      throw fail(`it has more than ${MAX_SWEEP_LEVELS} levels`);
    levels.push(value);
  };
  if (text.includes(':')) {
    const [startText, endText, stepText = '+1', extra] = text.split(':');
    if (extra !== undefined || startText === undefined || endText === undefined) {
      throw fail('a range is start:end[:step]');
    }
    const start = number(startText);
    const end = number(endText);
    if (end < start) throw fail('the end is below the start');
    const step = stepText.trim();
    const multiply = step.startsWith('x') || step.startsWith('*');
    const amount = Number(step.replace(/^[x*+]/, ''));
    if (!Number.isFinite(amount) || amount <= 0 || (multiply && amount <= 1)) {
      throw fail(`step ${JSON.stringify(step)} must be +N (N > 0) or xN (N > 1)`);
    }
    if (!multiply && !limits.fractional && !Number.isInteger(amount)) {
      throw fail(`step ${JSON.stringify(step)} must be a whole number`);
    }
    for (
      let level = start;
      level <= end * (1 + 1e-9);
      level = multiply ? level * amount : level + amount
    ) {
      const value = limits.fractional ? Number(level.toFixed(6)) : Math.round(level);
      // Multiplying by a fraction can round to the same whole level twice.
      if (value !== levels.at(-1)) push(value);
    }
    return levels;
  }
  for (const part of text.split(',')) push(number(part));
  return levels;
}
