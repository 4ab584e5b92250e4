/** What one measurement window saw. */
export interface WindowSample {
  /** Completed requests per second. */
  readonly throughput: number;
  /** Mean latency of the window's requests, ms. */
  readonly meanLatencyMs: number;
}

export interface StabilityRule {
  /** Consecutive windows that must agree (perf_analyzer: 3). */
  readonly windows: number;
  /** How far each may stray from their mean, as a fraction (perf_analyzer: 0.1). */
  readonly tolerance: number;
}

export const DEFAULT_STABILITY: StabilityRule = Object.freeze({ windows: 3, tolerance: 0.1 });

/**
 * perf_analyzer's rule: a level is measured once its last `windows` windows agree, each
 * window's throughput and mean latency within `tolerance` of those windows' mean. Windows
 * that completed nothing never count as stable.
 */
export function isStable(
  samples: readonly WindowSample[],
  rule: StabilityRule = DEFAULT_STABILITY,
): boolean {
  if (samples.length < rule.windows) return false;
  const last = samples.slice(-rule.windows);
  if (last.some((s) => !(s.throughput > 0))) return false;
  return (
    agrees(
      last.map((s) => s.throughput),
      rule.tolerance,
    ) &&
    agrees(
      last.map((s) => s.meanLatencyMs),
      rule.tolerance,
    )
  );
}

function agrees(values: readonly number[], tolerance: number): boolean {
  const mean = values.reduce((sum, v) => sum + v, 0) / values.length;
  if (mean === 0) return values.every((v) => v === 0);
  return values.every((v) => Math.abs(v - mean) <= tolerance * mean);
}
