import { type DType, KilnError, KilnErrorCode, bytesPerElement, shapeSize } from '@kiln/core';

/** One benchmark input: its shape and element type. */
export interface InputSpec {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** djl-bench's dtype suffixes after a parenthesised shape. */
export const SHAPE_DTYPE_SUFFIXES: Readonly<Record<string, DType>> = {
  f: 'float32',
  d: 'float64',
  s: 'float16',
  u: 'uint8',
  b: 'int8',
  i: 'int32',
  l: 'int64',
  B: 'bool',
};

const SUFFIX_OF: Readonly<Partial<Record<DType, string>>> = Object.fromEntries(
  Object.entries(SHAPE_DTYPE_SUFFIXES).map(([suffix, dtype]) => [dtype, suffix]),
);

/** Largest input one spec may ask for; synthetic inputs are allocated in full. */
export const MAX_INPUT_BYTES = 1024 ** 3;
const MAX_INPUT_RANK = 16;

/**
 * Parses djl-bench's `-s`: `1,3,224,224` (one float32 input) or parenthesised shapes with an
 * optional dtype suffix, `(1,3,224,224)f,(1,128)l`. A bad spec is INVALID_INPUT naming the
 * part that is wrong.
 */
export function parseShapes(text: string): InputSpec[] {
  const source = text.trim();
  if (source === '') throw badShape(text, 'it is empty');
  if (!source.includes('(')) return [spec(text, source.split(','), 'float32')];
  const specs: InputSpec[] = [];
  const part = /\s*\(([^()]*)\)\s*([A-Za-z]?)\s*(,|$)/y;
  while (part.lastIndex < source.length) {
    const start = part.lastIndex;
    const match = part.exec(source);
    if (!match) throw badShape(text, `cannot read it from ${JSON.stringify(source.slice(start))}`);
    const suffix = match[2]!;
    const dtype = suffix === '' ? 'float32' : SHAPE_DTYPE_SUFFIXES[suffix];
    if (dtype === undefined) {
      throw badShape(
        text,
        `unknown dtype suffix ${JSON.stringify(suffix)} (use ${Object.keys(SHAPE_DTYPE_SUFFIXES).join(' ')})`,
      );
    }
    specs.push(spec(text, match[1]!.split(','), dtype));
  }
  if (source.endsWith(',')) throw badShape(text, 'it ends with a comma');
  return specs;
}

/** The `-s` text for specs: `(1,4)f,(1,8)l`. */
export function formatShapes(specs: readonly InputSpec[]): string {
  return specs.map((s) => `(${s.shape.join(',')})${SUFFIX_OF[s.dtype] ?? ''}`).join(',');
}

function spec(text: string, dims: readonly string[], dtype: DType): InputSpec {
  const shape = dims.map((d) => {
    const dim = d.trim();
    if (!/^\d+$/.test(dim))
      throw badShape(text, `dimension ${JSON.stringify(dim)} is not a whole number`);
    const value = Number(dim);
    if (!Number.isSafeInteger(value)) throw badShape(text, `dimension ${dim} is too large`);
    return value;
  });
  if (shape.length > MAX_INPUT_RANK)
    throw badShape(text, `a shape has more than ${MAX_INPUT_RANK} dimensions`);
  const bytes = shapeSize(shape) * bytesPerElement(dtype);
  if (bytes > MAX_INPUT_BYTES) {
    throw badShape(
      text,
      `(${shape.join(',')}) ${dtype} needs ${bytes} bytes (at most ${MAX_INPUT_BYTES})`,
    );
  }
  return { shape, dtype };
}

function badShape(text: string, why: string): KilnError {
  return new KilnError(
    KilnErrorCode.InvalidInput,
    `bad input shape ${JSON.stringify(text)}: ${why}`,
    {
      details: { hint: 'shapes look like 1,3,224,224 or (1,3,224,224)f,(1,128)l' },
    },
  );
}
