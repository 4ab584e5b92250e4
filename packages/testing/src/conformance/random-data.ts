import { type DType, type DTypeStorage, allocate } from '@kiln/core';

/** A small seeded PRNG (mulberry32): tests must be reproducible. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const INT_BITS: Partial<Record<DType, number>> = {
  int8: 8,
  uint8: 8,
  int16: 16,
  uint16: 16,
  int32: 32,
  uint32: 32,
};

/**
 * Random values spanning each dtype's range. Half-precision bit patterns avoid NaN and
 * infinity, which engines may canonicalise, so an identity round trip must be bit-exact.
 */
export function randomData<D extends DType>(
  dtype: D,
  size: number,
  random: () => number,
): DTypeStorage[D] {
  const data = allocate(dtype, size) as DTypeStorage[DType];
  const int = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
  for (let i = 0; i < size; i++) {
    switch (dtype) {
      case 'bool':
        (data as Uint8Array)[i] = int(0, 1);
        break;
      case 'int8':
      case 'int16':
      case 'int32':
      case 'uint8':
      case 'uint16':
      case 'uint32': {
        const bits = INT_BITS[dtype]!;
        const signed = dtype.startsWith('int');
        const lo = signed ? -(2 ** (bits - 1)) : 0;
        const hi = signed ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
        (data as Int32Array)[i] = int(lo, hi);
        break;
      }
      case 'int64':
        (data as BigInt64Array)[i] = BigInt(int(-(2 ** 31), 2 ** 31)) * BigInt(int(1, 2 ** 31));
        break;
      case 'uint64':
        (data as BigUint64Array)[i] = BigInt(int(0, 2 ** 31)) * BigInt(int(1, 2 ** 31));
        break;
      case 'float16': {
        let bits = int(0, 0xffff);
        if (((bits >> 10) & 0x1f) === 0x1f) bits &= ~(1 << 14);
        (data as Uint16Array)[i] = bits;
        break;
      }
      case 'bfloat16': {
        let bits = int(0, 0xffff);
        if (((bits >> 7) & 0xff) === 0xff) bits &= ~(1 << 14);
        (data as Uint16Array)[i] = bits;
        break;
      }
      case 'float32':
      case 'float64':
        (data as Float64Array)[i] = (random() - 0.5) * 10 ** int(-3, 6);
        break;
      case 'string':
        (data as string[])[i] = `s${i}-${Math.floor(random() * 1e6).toString(36)}-é✓`;
        break;
    }
  }
  return data as DTypeStorage[D];
}
