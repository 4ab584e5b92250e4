import {
  type DType,
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  type TensorDescriptor,
  isDType,
  shapeSize,
} from '@kiln/core';

/** Largest warm-up tensor: a configuration typo must not allocate without bound. */
const MAX_WARMUP_ELEMENTS = 1 << 26;

/**
 * Parses `option.warmup`: forwards separated by `;`, the inputs of one forward by `|`, each
 * input `[dtype:]d0,d1,…`. `1,3,224,224;8,3,224,224` warms a one-input model at batch 1 and 8;
 * `int64:1,128|int64:1,128` a two-input one. Inputs are zeros, named and typed after the
 * declared inputs where those are known (float32 otherwise).
 */
export function parseWarmup(spec: string, declared: readonly TensorDescriptor[]): NDList[] {
  return spec
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((forward) =>
      NDList.of(
        ...forward.split('|').map((text, i) => {
          const [head, tail] = text.includes(':') ? text.split(':', 2) : [undefined, text];
          const dtype = (head?.trim() || declared[i]?.dtype || 'float32') as DType;
          if (!isDType(dtype) || dtype === 'string') {
            throw new KilnError(
              KilnErrorCode.InvalidConfig,
              `option.warmup: ${JSON.stringify(head)} is not a numeric dtype`,
            );
          }
          const shape = tail!.split(',').map((d) => Number(d.trim()));
          if (
            shape.some((d) => !Number.isInteger(d) || d < 0) ||
            shapeSize(shape) > MAX_WARMUP_ELEMENTS
          ) {
            throw new KilnError(
              KilnErrorCode.InvalidConfig,
              `option.warmup: ${JSON.stringify(text.trim())} is not a shape of at most ${MAX_WARMUP_ELEMENTS} elements`,
            );
          }
          return Tensor.zeros(dtype, shape, declared[i]?.name);
        }),
      ),
    );
}
