import { NDList, type ServingInput, type ServingOutput, Tensor } from '@kiln/core';
import { seededRandom } from '@kiln/testing';

/** `count` requests of one row `x` [1, inputSize] each, values uniform in [0, 1). */
export function rowRequests(count: number, inputSize: number, seed: number): ServingInput[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => {
    const x = new Float32Array(inputSize);
    for (let i = 0; i < inputSize; i++) x[i] = random();
    return { tensors: NDList.of(new Tensor('float32', x, [1, inputSize], 'x')) };
  });
}

/** The largest element-wise difference between two runs' tensor answers (Infinity if a shape differs). */
export function largestDifference(a: readonly unknown[], b: readonly unknown[]): number {
  let largest = 0;
  a.forEach((output, i) => {
    const left =
      (output as ServingOutput).type === 'tensors'
        ? (output as { tensors: NDList }).tensors.get(0).data
        : undefined;
    const other = b[i] as ServingOutput | undefined;
    const right = other?.type === 'tensors' ? other.tensors.get(0).data : undefined;
    if (!left || !right || left.length !== right.length) {
      largest = Infinity;
      return;
    }
    for (let k = 0; k < left.length; k++)
      largest = Math.max(largest, Math.abs(Number(left[k]) - Number(right[k])));
  });
  return largest;
}
