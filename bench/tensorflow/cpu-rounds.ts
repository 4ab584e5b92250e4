import { type Contender, type RoundResult, interleavedRounds } from '../harness/interleave.js';

export interface MeasuredRounds {
  /** Wall-clock milliseconds per call, per round. */
  readonly wall: RoundResult[];
  /**
   * CPU milliseconds per call (every thread of the process), per round: unlike wall time it
   * does not grow while other processes hold the cores, so ratios hold on a busy machine.
   */
  readonly cpu: RoundResult[];
}

/**
 * interleavedRounds (who goes first rotates each round) that also takes the process's CPU
 * time of every call.
 */
export async function measuredRounds(
  contenders: readonly Contender[],
  rounds: number,
  calls: number,
): Promise<MeasuredRounds> {
  const wall: RoundResult[] = [];
  const cpu: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) {
    const cpuPerCall: Record<string, number> = {};
    const timed = contenders.map((_, k) => {
      const contender = contenders[(round + k) % contenders.length]!;
      return {
        name: contender.name,
        call: async () => {
          const start = process.cpuUsage();
          const result = await contender.call();
          const used = process.cpuUsage(start);
          cpuPerCall[contender.name] =
            (cpuPerCall[contender.name] ?? 0) + (used.user + used.system) / 1000 / calls;
          return result;
        },
      };
    });
    const [result] = await interleavedRounds(timed, 1, calls);
    wall.push(result!);
    cpu.push({ msPerCall: cpuPerCall });
  }
  return { wall, cpu };
}

/**
 * Runs the contenders in turn for at least `ms` (and `minCalls` calls each): a new worker
 * thread compiles tfjs's WebAssembly in V8's baseline tier and optimises the hot functions
 * only after they have run a while, so short warm-ups would time the baseline code.
 */
export async function warmUp(
  contenders: readonly Contender[],
  ms: number,
  minCalls = 10,
): Promise<void> {
  const start = performance.now();
  for (let calls = 0; calls < minCalls || performance.now() - start < ms; calls++) {
    await interleavedRounds(contenders, 1, 1);
  }
}

/** Calls per segment so that the slowest contender's segment lasts about `segmentMs`. */
export async function callsForSegment(
  contenders: readonly Contender[],
  segmentMs: number,
): Promise<number> {
  const [round] = await interleavedRounds(contenders, 1, 1);
  const slowest = Math.max(...Object.values(round!.msPerCall));
  return Math.max(1, Math.round(segmentMs / slowest));
}
