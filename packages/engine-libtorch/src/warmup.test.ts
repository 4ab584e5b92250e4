import { describe, expect, it } from 'vitest';
import { parseWarmup } from './warmup.js';

describe('parseWarmup', () => {
  it('builds one zero input list per forward, typed and named after the declared inputs', () => {
    const lists = parseWarmup('1,3,8,8; 4,3,8,8', [
      { name: 'image', dtype: 'float16', shape: [-1, 3, 8, 8] },
    ]);
    expect(lists.map((l) => l.tensors.map((t) => [t.name, t.dtype, [...t.shape]]))).toEqual([
      [['image', 'float16', [1, 3, 8, 8]]],
      [['image', 'float16', [4, 3, 8, 8]]],
    ]);
  });

  it('takes several inputs per forward and explicit dtypes', () => {
    const [list] = parseWarmup('int64:2,16|int64:2,16|1', []);
    expect(list!.tensors.map((t) => [t.dtype, [...t.shape]])).toEqual([
      ['int64', [2, 16]],
      ['int64', [2, 16]],
      ['float32', [1]],
    ]);
  });

  it('refuses unknown dtypes, malformed shapes and huge tensors', () => {
    for (const spec of ['string:1', 'complex:1', '1,x', '-1,3', '65536,65536']) {
      expect(() => parseWarmup(spec, [])).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }),
      );
    }
  });
});
