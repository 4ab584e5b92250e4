/**
 * Learns what a decode run costs from the runs themselves, for the rolling loop's groupByPast (`@kiln/batching`). A run of `rows`
 * sequences padded to `past` positions takes about
 *
 *   fixed + perRow × rows + perPosition × rows × (past + 1)
 *
 * (the weights read once a run; each row's own arithmetic; the padded cache each row reads).
 * Splitting a batch into runs repeats only `fixed` and saves padded positions, so the run cost
 * groupByPast weighs is fixed ÷ perPosition, in padded positions. The three terms are fitted by
 * least squares over the decode runs seen, older runs weighing less (`decay` a run), so the
 * figure follows the machine. Until the runs can tell the terms apart (too few, all alike, or a
 * fit where a term comes out negative), the estimate it was made with stands.
 */
export class DecodeRunCosts {
  /** Weighted sums of xxᵀ (upper triangle) and xy over the runs, x = [1, rows, positions]. */
  private readonly xx = new Float64Array(6);
  private readonly xy = new Float64Array(3);
  private runs = 0;
  private fitted: number | undefined;

  constructor(
    /** Padded positions a run is taken to cost until the runs say. */
    readonly estimate: number,
    private readonly options: { readonly decay?: number; readonly minRuns?: number } = {},
  ) {}

  /** One decode run: its rows, the past they were padded to, and how long it took. */
  observe(rows: number, past: number, ms: number): void {
    if (!(rows > 0) || !(past >= 0) || !(ms >= 0) || !Number.isFinite(ms)) return;
    const decay = this.options.decay ?? 0.98;
    const x = [1, rows, rows * (past + 1)] as const;
    let k = 0;
    for (let i = 0; i < 3; i++) {
      this.xy[i] = this.xy[i]! * decay + x[i]! * ms;
      for (let j = i; j < 3; j++, k++) this.xx[k] = this.xx[k]! * decay + x[i]! * x[j]!;
    }
    this.runs++;
    this.fitted = undefined;
  }

  /** What one more run costs, in padded positions (rows × positions). */
  get runCost(): number {
    if (this.runs < (this.options.minRuns ?? 12)) return this.estimate;
    this.fitted ??= this.fit() ?? Number.NaN;
    return Number.isNaN(this.fitted) ? this.estimate : this.fitted;
  }

  /** fixed ÷ perPosition from the normal equations, or undefined where they cannot say. */
  private fit(): number | undefined {
    const [a = 0, b = 0, c = 0, d = 0, e = 0, f = 0] = this.xx;
    // The symmetric matrix [[a b c] [b d e] [c e f]]; its determinant by cofactors.
    const c00 = d * f - e * e;
    const c01 = c * e - b * f;
    const c02 = b * e - c * d;
    const det = a * c00 + b * c01 + c * c02;
    // Runs that vary too little in rows or past leave the terms inseparable.
    if (!(Math.abs(det) > 1e-6 * a * d * f)) return undefined;
    const [y0 = 0, y1 = 0, y2 = 0] = this.xy;
    const fixed = (c00 * y0 + c01 * y1 + c02 * y2) / det;
    const c12 = b * c - a * e;
    const c22 = a * d - b * b;
    const perPosition = (c02 * y0 + c12 * y1 + c22 * y2) / det;
    if (!(fixed > 0) || !(perPosition > 0)) return undefined;
    // Under one position a run would be free: a fit of noise, not of the model.
    return Math.max(1, fixed / perPosition);
  }
}

/**
 * A decode run's fixed cost in padded positions, estimated from the model's size: a run
 * reads every weight once, a padded position about three times its keys and values (the
 * cache concat's read and write, attention's read). On the trained tiny GPT this gives
 * about 390, where its measured run floor is 250–300 positions' worth (step-profile.ts);
 * on a model whose weights dwarf its cache it never splits.
 */
export function decodeRunCost(weightBytes: number, cacheBytesPerToken: number): number {
  return weightBytes / (3 * cacheBytesPerToken);
}
