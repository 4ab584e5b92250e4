/**
 * What a generation server could reach at no cost of its own, given what the model's runs cost:
 * the LLM bench's workload (vs-transformers-js.ts) simulated step by step over a cost model
 * measured from ONNX Runtime alone (ceiling.ts). Nothing here runs a model.
 */

/** Milliseconds a run of the model costs. */
export interface RunCosts {
  /** A decode run of `rows` sequences, each padded to `past` positions. */
  decode(rows: number, past: number): number;
  /** The prefill of one prompt of `tokens` tokens (no past). */
  prefill(tokens: number): number;
}

export interface CeilingRequest {
  readonly arrivalMs: number;
  readonly promptTokens: number;
  /** Tokens it generates: its prefill gives the first, each decode step one more. */
  readonly newTokens: number;
}

/**
 * How a decode step's rows are charged:
 * - `padded`: one run, every row padded to the longest past of the step (an export whose
 *   attention takes one dense past tensor computes that);
 * - `split`: the step's rows sorted by past and cut where two runs cost least, each padded to
 *   its own longest past (the best a scheduler can do by grouping rows by age);
 * - `ragged`: one run, every row charged its own past (attention over ragged pasts).
 */
export type StepShape = 'padded' | 'split' | 'ragged';

export interface CeilingRun {
  /** First arrival to the last token. */
  readonly ms: number;
  readonly tokens: number;
  readonly tokensPerS: number;
  /** Steps taken (one at a time: runs). */
  readonly steps: number;
}

/**
 * One request at a time, each as soon as it has arrived and the previous one is done: its
 * prefill, then one single-row decode run a token (what a server around a one-at-a-time
 * pipeline does, at no cost of its own).
 */
export function oneAtATime(requests: readonly CeilingRequest[], costs: RunCosts): CeilingRun {
  const byArrival = [...requests].sort((a, b) => a.arrivalMs - b.arrivalMs);
  const start = byArrival[0]?.arrivalMs ?? 0;
  let now = start;
  let tokens = 0;
  for (const request of byArrival) {
    now = Math.max(now, request.arrivalMs) + costs.prefill(request.promptTokens);
    for (let k = 1; k < request.newTokens; k++)
      now += costs.decode(1, request.promptTokens + k - 1);
    tokens += request.newTokens;
  }
  return run(now - start, tokens, tokens);
}

/**
 * Rolling batching under a closed-loop client of `concurrency`: a request is sent once it has
 * arrived and fewer than `concurrency` are in flight, and admitted at the next step boundary.
 * A step runs each admitted prompt's prefill (a run of its own) and one decode run (or two,
 * `split`) for the sequences already started; a sequence's slot frees when its last token is
 * made.
 */
export function rolling(
  requests: readonly CeilingRequest[],
  costs: RunCosts,
  concurrency: number,
  shape: StepShape,
): CeilingRun {
  const waiting = [...requests].sort((a, b) => a.arrivalMs - b.arrivalMs);
  const start = waiting[0]?.arrivalMs ?? 0;
  const active: { past: number; left: number }[] = [];
  let now = start;
  let tokens = 0;
  let steps = 0;
  while (waiting.length > 0 || active.length > 0) {
    if (active.length === 0 && waiting[0]!.arrivalMs > now) now = waiting[0]!.arrivalMs;
    let stepMs = 0;
    // The decode run for the sequences already going, at their pasts before this step.
    const decoding = active.filter((s) => s.left > 0);
    if (decoding.length > 0) stepMs += decodeStepMs(decoding, costs, shape);
    for (const s of decoding) {
      s.past++;
      s.left--;
      tokens++;
    }
    // Prompts sent by now: each prefilled, giving its first token.
    while (waiting.length > 0 && active.length < concurrency && waiting[0]!.arrivalMs <= now) {
      const request = waiting.shift()!;
      stepMs += costs.prefill(request.promptTokens);
      active.push({ past: request.promptTokens, left: request.newTokens - 1 });
      tokens++;
    }
    now += stepMs;
    if (stepMs > 0) steps++;
    for (let i = active.length - 1; i >= 0; i--) if (active[i]!.left === 0) active.splice(i, 1);
    // Nothing ran (every slot busy with finished sequences cannot happen): wait for an arrival.
    if (stepMs === 0 && waiting.length > 0) now = Math.max(now, waiting[0]!.arrivalMs);
  }
  return run(now - start, tokens, steps);
}

function decodeStepMs(
  rows: readonly { past: number }[],
  costs: RunCosts,
  shape: StepShape,
): number {
  const pasts = rows.map((r) => r.past).sort((a, b) => a - b);
  const n = pasts.length;
  const longest = pasts[n - 1]!;
  if (shape === 'padded') return costs.decode(n, longest);
  if (shape === 'ragged') return costs.decode(n, pasts.reduce((a, b) => a + b, 0) / n);
  let best = costs.decode(n, longest);
  for (let cut = 1; cut < n; cut++)
    best = Math.min(best, costs.decode(cut, pasts[cut - 1]!) + costs.decode(n - cut, longest));
  return best;
}

function run(ms: number, tokens: number, steps: number): CeilingRun {
  return { ms, tokens, tokensPerS: ms > 0 ? (tokens * 1000) / ms : 0, steps };
}

/**
 * Costs from measured points: decode runs on a grid of rows × pasts (linear between the pasts
 * measured and beyond them along the last segment; linear between the row counts measured),
 * prefills at a few prompt lengths (linear between and beyond them).
 */
export function interpolatedCosts(measured: {
  readonly rows: readonly number[];
  readonly pasts: readonly number[];
  /** decodeMs[i][j]: `rows[i]` rows at past `pasts[j]`. */
  readonly decodeMs: readonly (readonly number[])[];
  readonly prompts: readonly number[];
  readonly prefillMs: readonly number[];
}): RunCosts {
  const { rows, pasts, decodeMs, prompts, prefillMs } = measured;
  return {
    decode: (n, past) => {
      const along = decodeMs.map((line) => linear(pasts, line, past));
      return linear(rows, along, n);
    },
    prefill: (tokens) => linear(prompts, prefillMs, tokens),
  };
}

/** y at x on the polyline through (xs, ys) (xs ascending), extended along its end segments. */
export function linear(xs: readonly number[], ys: readonly number[], x: number): number {
  if (xs.length === 1) return ys[0]!;
  let i = 1;
  while (i < xs.length - 1 && x > xs[i]!) i++;
  const x0 = xs[i - 1]!;
  const x1 = xs[i]!;
  const y0 = ys[i - 1]!;
  const y1 = ys[i]!;
  return y0 + ((y1 - y0) * (x - x0)) / (x1 - x0);
}
