/** What one listener's part of the storm counted. Every count but `requests` must end at 0. */
export interface PhaseTally {
  requests: number;
  /** The server (or one of its processes) died, or refused a connection. */
  crashes: number;
  /** No answer within the storm's hang limit. */
  hangs: number;
  /** A 5xx other than 503/501 over HTTP; INTERNAL, UNKNOWN or DATA_LOSS over gRPC. */
  unexpected5xx: number;
  /** An HTTP error answer whose body is not JSON; over gRPC, details with a stack or a path. */
  nonJson: number;
  /** A well-formed request, sent beside hostile ones, that failed or was answered wrongly. */
  innocentFailures: number;
  samples: { problem: string; kind: string; status: number; request: string; answer: string }[];
}

export type Problem = Exclude<keyof PhaseTally, 'requests' | 'samples'>;

export function newTally(): PhaseTally {
  return {
    requests: 0,
    crashes: 0,
    hangs: 0,
    unexpected5xx: 0,
    nonJson: 0,
    innocentFailures: 0,
    samples: [],
  };
}

/** Counts a problem and keeps a few examples of each for the report. */
export function count(
  tally: PhaseTally,
  problem: Problem,
  sample: { kind: string; status: number; request: string; answer: string },
): void {
  tally[problem]++;
  if (tally.samples.filter((s) => s.problem === problem).length < 8)
    tally.samples.push({
      problem,
      ...sample,
      request: sample.request.slice(0, 300),
      answer: sample.answer.slice(0, 300),
    });
}

/** Runs `lanes` copies of `lane` at once; each takes work until there is none. */
export async function inLanes(lanes: number, lane: () => Promise<void>): Promise<void> {
  await Promise.all(Array.from({ length: lanes }, lane));
}
