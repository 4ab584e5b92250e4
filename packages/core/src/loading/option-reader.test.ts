import { describe, expect, it } from 'vitest';
import { MAX_OPTION_INTEGER, OptionReader } from './option-reader.js';

describe('OptionReader', () => {
  const read = (options: Record<string, string>) => new OptionReader(options);

  it('reads the same booleans for every engine, and treats blank as unset', () => {
    for (const yes of ['true', 'TRUE', 'yes', 'on', '1', ' true ']) {
      expect(read({ k: yes }).boolean('k')).toBe(true);
    }
    for (const no of ['false', 'no', 'Off', '0']) expect(read({ k: no }).boolean('k')).toBe(false);
    expect(read({ k: '  ' }).boolean('k')).toBeUndefined();
    expect(read({}).boolean('k')).toBeUndefined();
    expect(() => read({ k: 'maybe' }).boolean('k')).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: 'option.k=maybe must be true or false',
      }),
    );
  });

  it('checks integers against one default limit, or the range given', () => {
    expect(read({ n: '4' }).integer('n', { min: 1 })).toBe(4);
    expect(read({ n: String(MAX_OPTION_INTEGER) }).integer('n')).toBe(MAX_OPTION_INTEGER);
    for (const bad of ['0', '1.5', '1e3', 'two', String(MAX_OPTION_INTEGER + 1), '0x10']) {
      expect(() => read({ n: bad }).integer('n', { min: 1 })).toThrow(
        expect.objectContaining({
          code: 'INVALID_CONFIG',
          message: `option.n=${bad} must be an integer from 1 to ${MAX_OPTION_INTEGER}`,
        }),
      );
    }
    expect(() => read({ n: '5' }).integer('n', { min: 0, max: 4 })).toThrow(/from 0 to 4/);
  });

  it('reads positive numbers, choices without case, and trimmed strings', () => {
    expect(read({ s: '0.5' }).positiveNumber('s')).toBe(0.5);
    expect(() => read({ s: '-1' }).positiveNumber('s')).toThrow(/must be a positive number/);
    expect(read({ m: 'Parallel' }).oneOf('m', ['sequential', 'parallel'])).toBe('parallel');
    expect(() => read({ m: 'fast' }).oneOf('m', ['sequential', 'parallel'])).toThrow(
      /option.m=fast is not one of sequential, parallel/,
    );
    expect(read({ s: '  model.py ' }).string('s')).toBe('model.py');
  });
});
