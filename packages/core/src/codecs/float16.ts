import { f16round } from '@petamoriken/float16';

// Scratch space shared by the scalar conversions; JS is single-threaded per isolate.
const float32 = new Float32Array(1);
const float32Bits = new Uint32Array(float32.buffer);

/**
 * IEEE 754 half-precision bits of a number, rounded to nearest even. `f16round` does the
 * rounding; the rounded value is exact in float32, so its bits only need re-packing (the
 * library's DataView helpers are ~50× slower per element).
 */
export function toFloat16Bits(value: number): number {
  float32[0] = f16round(value);
  const bits = float32Bits[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127;
  const mantissa = bits & 0x7fffff;
  if (exponent === 128) return sign | (mantissa === 0 ? 0x7c00 : 0x7e00);
  if (exponent === -127) return sign;
  if (exponent >= -14) return sign | ((exponent + 15) << 10) | (mantissa >>> 13);
  return sign | ((0x800000 | mantissa) >>> (-exponent - 1));
}

/** 2^(e − 25) for each half-precision exponent e: the weight of the mantissa's lowest bit. */
const MANTISSA_SCALE = Float64Array.from({ length: 32 }, (_, exponent) => 2 ** (exponent - 25));
const SUBNORMAL_SCALE = 2 ** -24;

/** The number that half-precision bits stand for (exact). */
export function fromFloat16Bits(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * SUBNORMAL_SCALE;
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : Number.NaN;
  return sign * (0x400 + fraction) * MANTISSA_SCALE[exponent]!;
}

function bfloat16FromFloat32Bits(bits: number): number {
  // NaN would round into infinity or lose its quiet bit; keep it a quiet NaN of the same sign.
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x0040) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bfloat16 bits of a number: first to float32, then rounded to nearest even. */
export function toBfloat16Bits(value: number): number {
  float32[0] = value;
  return bfloat16FromFloat32Bits(float32Bits[0]!);
}

/** The number that bfloat16 bits stand for (exact). */
export function fromBfloat16Bits(bits: number): number {
  float32Bits[0] = (bits & 0xffff) << 16;
  return float32[0]!;
}

export function toFloat16BitsArray(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = toFloat16Bits(values[i]!);
  return out;
}

/** float16 bits widened to float32, which holds every half-precision value exactly. */
export function fromFloat16BitsArray(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = fromFloat16Bits(bits[i]!);
  return out;
}

export function toBfloat16BitsArray(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  if (values instanceof Float32Array) {
    const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = 0; i < words.length; i++) out[i] = bfloat16FromFloat32Bits(words[i]!);
    return out;
  }
  for (let i = 0; i < values.length; i++) out[i] = toBfloat16Bits(values[i]!);
  return out;
}

/** bfloat16 bits widened to float32 (exact: bfloat16 is float32's upper half). */
export function fromBfloat16BitsArray(bits: Uint16Array): Float32Array {
  const words = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) words[i] = bits[i]! << 16;
  return new Float32Array(words.buffer);
}
