/**
 * One way of doing the work under comparison. `measure` runs one round of it and returns the
 * round's figure (higher or lower is better as the bench decides: throughput, ms per call).
 */
export interface RoundContender {
  readonly name: string;
  measure(round: number): Promise<number>;
}

/** Per contender, its figure in each round, in round order. */
export type RoundFigures = Record<string, number[]>;

/**
 * Runs the contenders in alternation — A B, B A, A B, … (with more than two, the order rotates)
 * — so that drift in the machine's load hits every contender alike. Warm-up rounds run the same
 * way and are not recorded.
 */
export async function alternateRounds(
  contenders: readonly RoundContender[],
  options: { rounds: number; warmupRounds?: number },
): Promise<RoundFigures> {
  if (options.rounds < 1) throw new Error('at least one round');
  const figures: RoundFigures = Object.fromEntries(contenders.map((c) => [c.name, []]));
  const warmup = options.warmupRounds ?? 0;
  for (let round = -warmup; round < options.rounds; round++) {
    for (const contender of orderOf(contenders, round)) {
      const figure = await contender.measure(round);
      if (round >= 0) figures[contender.name]!.push(figure);
    }
  }
  return figures;
}

/** Round r's running order: two contenders swap each round; more rotate by one. */
export function orderOf<T>(contenders: readonly T[], round: number): T[] {
  const n = contenders.length;
  const r = ((round % n) + n) % n;
  if (n === 2) return r === 0 ? [...contenders] : [contenders[1]!, contenders[0]!];
  return contenders.map((_, k) => contenders[(r + k) % n]!);
}
