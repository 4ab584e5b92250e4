/** A request as the bound sees it: when it arrives and how many steps it needs. */
export interface BoundRequest {
  readonly arrivalMs: number;
  /** Tokens it generates: one per step it takes part in (its prefill step gives the first). */
  readonly tokens: number;
}

/**
 * The shortest time from the first arrival to the last token that any scheduler could reach
 * on a decoder whose every step costs `stepMs` whatever it holds, at most `maxBatch`
 * sequences a step, one step at a time.
 *
 * Take any moment t at which a request arrives. The requests arriving at t or later need
 * W(t) tokens in all, every one made by a step that starts at t or later; a step makes at
 * most `maxBatch` of them and at most one per sequence, so those steps number at least
 * ceil(W(t) ÷ maxBatch) and at least the most tokens any one of them needs. Steps run one
 * after another, so the last of them ends no sooner than t + that many × stepMs. The bound is
 * the largest of these over every t (t = 0: all the work; the last arrival: its own steps).
 * It even allows what no rolling scheduler does (pausing a sequence to run another, knowing
 * the future), so it is a floor that may not be reachable, never one that is too high.
 * Prompts are taken as one step's prefill, as a flat step cost makes them.
 */
export function makespanBoundMs(
  requests: readonly BoundRequest[],
  maxBatch: number,
  stepMs: number,
): number {
  const byArrival = [...requests].sort((a, b) => a.arrivalMs - b.arrivalMs);
  let bound = 0;
  let work = 0;
  let longest = 0;
  // From the last arrival back: the work arriving at or after each moment.
  for (let i = byArrival.length - 1; i >= 0; i--) {
    const { arrivalMs, tokens } = byArrival[i]!;
    work += tokens;
    longest = Math.max(longest, tokens);
    const steps = Math.max(Math.ceil(work / maxBatch), longest);
    bound = Math.max(bound, arrivalMs - byArrival[0]!.arrivalMs + steps * stepMs);
  }
  return bound;
}

/**
 * The time rolling batching itself would take at no cost of its own: requests admitted in
 * arrival order at step boundaries while a slot is free, every step `stepMs`, each sequence
 * one token a step. Between the bound and this lies the policy (first come, first served,
 * never pausing a sequence); between this and a measured run, the implementation and the
 * machine.
 */
export function firstComeFirstServedMs(
  requests: readonly BoundRequest[],
  maxBatch: number,
  stepMs: number,
): { ms: number; steps: number } {
  return admittedMs(requests, maxBatch, stepMs, undefined);
}

/**
 * The time rolling batching would take at no cost of its own when it admits the waiting
 * request with the most tokens to make first (`rolling_batch_admission=longest_first`), each
 * one's claim growing by a token for every step it has waited, as the queue ranks them; ties
 * go in arrival order. Otherwise as firstComeFirstServedMs.
 */
export function longestFirstMs(
  requests: readonly BoundRequest[],
  maxBatch: number,
  stepMs: number,
): { ms: number; steps: number } {
  return admittedMs(
    requests,
    maxBatch,
    stepMs,
    (r, now) => r.tokens + (now - r.arrivalMs) / stepMs,
  );
}

/**
 * Rolling batching at no cost of its own: requests admitted at step boundaries while a slot is
 * free, highest `rank` first (arrival order without one, and between equal ranks), each
 * sequence one token a step.
 */
function admittedMs(
  requests: readonly BoundRequest[],
  maxBatch: number,
  stepMs: number,
  rank: ((request: BoundRequest, now: number) => number) | undefined,
): { ms: number; steps: number } {
  const byArrival = [...requests].sort((a, b) => a.arrivalMs - b.arrivalMs);
  const start = byArrival[0]?.arrivalMs ?? 0;
  let now = start;
  let steps = 0;
  let active: number[] = [];
  let next = 0;
  const waiting: BoundRequest[] = [];
  while (next < byArrival.length || waiting.length > 0 || active.length > 0) {
    while (next < byArrival.length && byArrival[next]!.arrivalMs <= now)
      waiting.push(byArrival[next++]!);
    // A stable sort: equal ranks stay in arrival order.
    if (rank) waiting.sort((a, b) => rank(b, now) - rank(a, now));
    while (active.length < maxBatch && waiting.length > 0) active.push(waiting.shift()!.tokens);
    if (active.length === 0) {
      now = byArrival[next]!.arrivalMs;
      continue;
    }
    now += stepMs;
    steps++;
    active = active.map((left) => left - 1).filter((left) => left > 0);
  }
  return { ms: now - start, steps };
}
