import { KilnError, KilnErrorCode } from '@kiln/core';

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Longest run accepted: a day. */
export const MAX_DURATION_MS = 24 * 3_600_000;

/**
 * Parses `-d`: a number with a unit (`500ms`, `30s`, `2m`, `1h`), or a bare number of
 * minutes as djl-bench reads it.
 */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!match) {
    throw new KilnError(KilnErrorCode.InvalidInput, `bad duration ${JSON.stringify(text)}`, {
      details: { hint: 'durations look like 30s, 500ms, 2m or 1h (a bare number is minutes)' },
    });
  }
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 'm']!;
  if (ms <= 0 || ms > MAX_DURATION_MS) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `duration ${text} must be above 0 and at most 24h`,
    );
  }
  return ms;
}

/** `1500` → `1.5s`, for reports. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(2))}s`;
  return `${Number((ms / 60_000).toFixed(2))}m`;
}
