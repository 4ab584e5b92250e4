import os from 'node:os';

/** A figure over rounds: its median and the range the rounds spanned. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly rounds: number;
}

/** The q-quantile (0–1) by linear interpolation between the nearest ranks. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

export function spreadOf(values: readonly number[]): Spread {
  return {
    median: median(values),
    min: values.length ? Math.min(...values) : Number.NaN,
    max: values.length ? Math.max(...values) : Number.NaN,
    rounds: values.length,
  };
}

/**
 * The ratio a ÷ b taken within each round, then summarised: both contenders of a round ran
 * under the same machine state, so drift in load cancels out of each ratio.
 */
export function ratioSpread(a: readonly number[], b: readonly number[]): Spread {
  if (a.length !== b.length) throw new Error(`ratio over ${a.length} and ${b.length} rounds`);
  return spreadOf(a.map((x, i) => x / b[i]!));
}

/** `12.3 [11.0–13.1]`: median [min–max]. */
export function formatSpread(spread: Spread, digits = 1): string {
  const f = (n: number) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
  return `${f(spread.median)} [${f(spread.min)}–${f(spread.max)}]`;
}

/** A goal a figure is held to: at least or at most a value. */
export type Goal = { readonly atLeast: number } | { readonly atMost: number };

export function meets(value: number, goal: Goal): boolean {
  return 'atLeast' in goal ? value >= goal.atLeast : value <= goal.atMost;
}

export function formatGoal(goal: Goal): string {
  return 'atLeast' in goal ? `≥ ${goal.atLeast}` : `≤ ${goal.atMost}`;
}

/** `label: 1.23× [1.10–1.31] (goal ≥ 2: misses)`. The verdict is taken on the median. */
export function goalLine(
  label: string,
  spread: Spread,
  goal: Goal,
  unit = '×',
  digits = 2,
): string {
  const verdict = meets(spread.median, goal) ? 'meets' : 'misses';
  return `${label}: ${formatSpread(spread, digits)}${unit} (goal ${formatGoal(goal)}${unit === '×' ? '×' : ` ${unit.trim()}`}: ${verdict})`;
}

/** The machine's 1/5/15-minute load averages, printed with every set of figures. */
export function loadAverage(): string {
  return os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' / ');
}

/** One header line naming the machine and its load, for the start and end of a run. */
export function machineLine(): string {
  return `${os.availableParallelism()} cores, Node ${process.version}, load average ${loadAverage()} (1/5/15 min)`;
}
