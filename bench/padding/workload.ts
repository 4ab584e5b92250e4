import { SeededRandom } from '@kiln/model-tools';

/** One request: the token ids of a sequence. */
export interface SequenceRequest {
  readonly ids: BigInt64Array;
}

export interface WorkloadOptions {
  readonly seed: number;
  readonly minLength: number;
  readonly maxLength: number;
  readonly vocabSize: number;
}

/** Requests with lengths uniform in [minLength, maxLength] and random token ids, reproducibly. */
export function sequenceRequests(count: number, options: WorkloadOptions): SequenceRequest[] {
  const random = new SeededRandom(options.seed);
  return Array.from({ length: count }, () => {
    const length = options.minLength + random.int(options.maxLength - options.minLength + 1);
    // Ids 1.. so that 0 stays the pad token.
    const ids = BigInt64Array.from({ length }, () => BigInt(1 + random.int(options.vocabSize - 1)));
    return { ids };
  });
}
