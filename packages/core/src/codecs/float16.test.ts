import { getFloat16, setFloat16 } from '@petamoriken/float16';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  fromBfloat16Bits,
  fromBfloat16BitsArray,
  fromFloat16Bits,
  fromFloat16BitsArray,
  toBfloat16Bits,
  toBfloat16BitsArray,
  toFloat16Bits,
  toFloat16BitsArray,
} from './float16.js';

const ALL_BITS = Uint16Array.from({ length: 0x10000 }, (_, i) => i);
const isNaNBits = (bits: number, exponentMask: number, mantissaMask: number) =>
  (bits & exponentMask) === exponentMask && (bits & mantissaMask) !== 0;

describe('float16', () => {
  it('converts known values', () => {
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(-2)).toBe(0xc000);
    expect(toFloat16Bits(65504)).toBe(0x7bff);
    expect(toFloat16Bits(65520)).toBe(0x7c00); // rounds up to infinity
    expect(toFloat16Bits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(toFloat16Bits(-0)).toBe(0x8000);
    expect(fromFloat16Bits(0x3555)).toBeCloseTo(0.33325, 5);
    expect(fromFloat16Bits(0xfc00)).toBe(-Infinity);
    expect(fromFloat16Bits(0x7e00)).toBeNaN();
  });

  it('rounds to nearest even', () => {
    // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
    expect(toFloat16Bits(1 + 2 ** -11)).toBe(0x3c00);
    expect(toFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
  });

  it('round-trips every non-NaN bit pattern, scalar and array alike', () => {
    const numbers = fromFloat16BitsArray(ALL_BITS);
    const back = toFloat16BitsArray(numbers);
    const wrong = ALL_BITS.filter((bits) =>
      isNaNBits(bits, 0x7c00, 0x03ff)
        ? !Number.isNaN(numbers[bits])
        : back[bits] !== bits || !Object.is(fromFloat16Bits(bits), numbers[bits]),
    );
    expect(Array.from(wrong)).toEqual([]);
  });

  it("agrees with the library's own DataView conversions", () => {
    const view = new DataView(new ArrayBuffer(2));
    const disagree = ALL_BITS.filter((bits) => {
      view.setUint16(0, bits, true);
      return !Object.is(getFloat16(view, 0, true), fromFloat16Bits(bits));
    });
    expect(Array.from(disagree)).toEqual([]);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.double(),
          fc.double({ min: -70000, max: 70000 }),
          fc.double({ min: -1e-4, max: 1e-4 }),
        ),
        (value) => {
          setFloat16(view, 0, value, true);
          const expected = view.getUint16(0, true);
          // Any NaN is a NaN; the library and Kiln may pick different payloads.
          if (Number.isNaN(value)) expect(fromFloat16Bits(toFloat16Bits(value))).toBeNaN();
          else expect(toFloat16Bits(value)).toBe(expected);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('bfloat16', () => {
  it('converts known values', () => {
    expect(toBfloat16Bits(1)).toBe(0x3f80);
    expect(toBfloat16Bits(-2)).toBe(0xc000);
    expect(toBfloat16Bits(Infinity)).toBe(0x7f80);
    expect(toBfloat16Bits(3.4e38)).toBe(0x7f80); // rounds past the largest finite value
    expect(fromBfloat16Bits(0x4049)).toBe(3.140625);
  });

  it('rounds float32 to nearest even', () => {
    const f32 = (bits: number) => new Float32Array(Uint32Array.of(bits).buffer)[0]!;
    expect(toBfloat16Bits(f32(0x3f808000))).toBe(0x3f80); // tie, even stays
    expect(toBfloat16Bits(f32(0x3f818000))).toBe(0x3f82); // tie, odd rounds up
    expect(toBfloat16Bits(f32(0x3f808001))).toBe(0x3f81); // above the tie
    expect(toBfloat16Bits(f32(0x3f807fff))).toBe(0x3f80); // below the tie
  });

  it('keeps NaN a NaN, even one whose payload sits in the dropped half', () => {
    expect(fromBfloat16Bits(toBfloat16Bits(NaN))).toBeNaN();
    const lowPayload = new Float32Array(Uint32Array.of(0x7f800001).buffer);
    expect(fromBfloat16Bits(toBfloat16BitsArray(lowPayload)[0]!)).toBeNaN();
  });

  it('round-trips every non-NaN bit pattern, scalar and array alike', () => {
    const numbers = fromBfloat16BitsArray(ALL_BITS);
    const fromFloat32 = toBfloat16BitsArray(numbers);
    const fromNumbers = toBfloat16BitsArray(Array.from(numbers));
    const wrong = ALL_BITS.filter(
      (bits) =>
        !isNaNBits(bits, 0x7f80, 0x007f) &&
        (fromFloat32[bits] !== bits ||
          fromNumbers[bits] !== bits ||
          !Object.is(fromBfloat16Bits(bits), numbers[bits])),
    );
    expect(Array.from(wrong)).toEqual([]);
  });
});
