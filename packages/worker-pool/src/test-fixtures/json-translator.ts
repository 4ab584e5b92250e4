import {
  KilnError,
  KilnErrorCode,
  NDList,
  type ServingInput,
  type ServingOutput,
  StackBatchifier,
  Tensor,
  type Translator,
  type TranslatorFactory,
} from '@kiln/core';

/**
 * A translator for the pool's tests: the body `{"x": [numbers]}` becomes a [1, n] float32
 * tensor (rows of equal length batch together), and the output is `{"y": [numbers]}`.
 */
export class JsonVectorTranslator implements Translator<ServingInput, ServingOutput> {
  readonly batchifier = new StackBatchifier();

  processInput(_ctx: unknown, input: ServingInput): NDList {
    if (input.tensors) return input.tensors;
    let value: unknown;
    try {
      value = JSON.parse(new TextDecoder().decode(input.body ?? new Uint8Array()));
    } catch {
      throw new KilnError(KilnErrorCode.InvalidInput, 'body is not JSON');
    }
    const x = (value as { x?: unknown }).x;
    if (!Array.isArray(x) || x.length === 0 || !x.every((v) => typeof v === 'number')) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        'body needs "x": a non-empty array of numbers',
      );
    }
    return NDList.of(new Tensor('float32', Float32Array.from(x as number[]), [1, x.length], 'x'));
  }

  processOutput(_ctx: unknown, output: NDList): ServingOutput {
    return { type: 'json', value: { y: Array.from(output.get(0).data as Float32Array) } };
  }
}

export const translatorFactory: TranslatorFactory<ServingInput, ServingOutput> = {
  name: 'JsonVector',
  newInstance: () => new JsonVectorTranslator(),
};

/** A request body for the translator above. */
export function vectorBody(x: readonly number[]): ServingInput {
  return { body: new TextEncoder().encode(JSON.stringify({ x })), contentType: 'application/json' };
}
