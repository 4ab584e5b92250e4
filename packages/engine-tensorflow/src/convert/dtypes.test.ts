import { describe, expect, it } from 'vitest';
import { DTYPES, KilnError } from '@kiln/core';
import { TFJS_DTYPES, fromTfjsDType, tfjsDTypeOfTfDataType, toTfjsDType } from './dtypes.js';

describe('TensorFlow.js dtypes', () => {
  it('passes the four dtypes tfjs holds unchanged, both ways', () => {
    for (const dtype of TFJS_DTYPES) {
      expect(toTfjsDType(dtype, 'input x')).toBe(dtype);
      expect(fromTfjsDType(dtype, 'output y')).toBe(dtype);
    }
  });

  it('refuses every other Kiln dtype with UNSUPPORTED_DTYPE naming the tensor and a cast', () => {
    const others = DTYPES.filter((d) => !(TFJS_DTYPES as readonly string[]).includes(d));
    expect(others).toHaveLength(10);
    for (const dtype of others) {
      const error = catchError(() => toTfjsDType(dtype, 'input x'));
      expect(error.code).toBe('UNSUPPORTED_DTYPE');
      expect(error.message).toContain(`input x is ${dtype}`);
      expect(error.message).toMatch(/cast it to (int32|float32)/);
    }
    expect(catchError(() => toTfjsDType('int64', 'input ids')).message).toContain(
      'cast it to int32',
    );
    expect(catchError(() => toTfjsDType('float64', 'input x')).message).toContain(
      'cast it to float32',
    );
  });

  it('refuses tfjs dtypes Kiln has no type for (complex64) and unknown ones', () => {
    expect(catchError(() => fromTfjsDType('complex64', 'output z')).code).toBe('UNSUPPORTED_DTYPE');
    expect(catchError(() => fromTfjsDType(undefined, 'output z')).message).toContain(
      'of unknown type',
    );
  });

  it('maps TensorFlow DataType names the way tfjs-converter runs them', () => {
    expect(tfjsDTypeOfTfDataType('DT_FLOAT')).toBe('float32');
    expect(tfjsDTypeOfTfDataType('DT_DOUBLE')).toBe('float32');
    expect(tfjsDTypeOfTfDataType('DT_INT64')).toBe('int32');
    expect(tfjsDTypeOfTfDataType('DT_UINT8')).toBe('int32');
    expect(tfjsDTypeOfTfDataType('DT_BOOL')).toBe('bool');
    expect(tfjsDTypeOfTfDataType('DT_STRING')).toBe('string');
    expect(tfjsDTypeOfTfDataType('DT_COMPLEX64')).toBe('complex64');
    expect(tfjsDTypeOfTfDataType('DT_INT16')).toBeUndefined();
  });
});

function catchError(fn: () => unknown): KilnError {
  try {
    fn();
  } catch (error) {
    if (error instanceof KilnError) return error;
    throw error;
  }
  throw new Error('expected a KilnError');
}
