import { KilnError } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { formatShapes, parseShapes } from './shapes.js';

describe('parseShapes', () => {
  it('reads a bare shape as one float32 input, as djl-bench does', () => {
    expect(parseShapes('1,3,224,224')).toEqual([{ shape: [1, 3, 224, 224], dtype: 'float32' }]);
    expect(parseShapes(' 1, 4 ')).toEqual([{ shape: [1, 4], dtype: 'float32' }]);
  });

  it('reads several parenthesised shapes with dtype suffixes', () => {
    expect(parseShapes('(1,3,224,224)f,(1,128)l')).toEqual([
      { shape: [1, 3, 224, 224], dtype: 'float32' },
      { shape: [1, 128], dtype: 'int64' },
    ]);
    expect(parseShapes('(2)d, (3,1)s,(4)u,(5)b,(6)i,(7)B,(8)').map((s) => s.dtype)).toEqual([
      'float64',
      'float16',
      'uint8',
      'int8',
      'int32',
      'bool',
      'float32',
    ]);
  });

  it('round-trips through formatShapes', () => {
    const specs = parseShapes('(1,3,8,8)f,(1,16)l,(2)B');
    expect(parseShapes(formatShapes(specs))).toEqual(specs);
  });

  it.each([
    ['', /empty/],
    ['1,x,3', /"x" is not a whole number/],
    ['1,-3', /"-3" is not a whole number/],
    ['(1,2)q', /unknown dtype suffix "q"/],
    ['(1,2)f(3)', /cannot read it/],
    ['(1,2)f,', /ends with a comma/],
    ['(1,2', /cannot read it/],
    ['()', /is not a whole number/],
    ['100000,100000,100000', /needs \d+ bytes/],
  ])('refuses %j with INVALID_INPUT', (text, message) => {
    const error = (() => {
      try {
        parseShapes(text);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(KilnError);
    expect((error as KilnError).code).toBe('INVALID_INPUT');
    expect((error as KilnError).message).toMatch(message);
    expect((error as KilnError).details?.hint).toMatch(/1,3,224,224/);
  });
});
