import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SAVED_MODEL_SIGNATURE,
  DEFAULT_SAVED_MODEL_TAGS,
  readTfModelOptions,
} from './options.js';

describe('readTfModelOptions', () => {
  it('defaults to the serve tags and the serving_default signature', () => {
    expect(readTfModelOptions({})).toEqual({
      modelName: undefined,
      tags: DEFAULT_SAVED_MODEL_TAGS,
      signature: DEFAULT_SAVED_MODEL_SIGNATURE,
    });
  });

  it('reads option.modelName, comma-separated option.tags and option.signature', () => {
    expect(
      readTfModelOptions({ modelName: 'net', tags: ' serve, gpu ,', signature: 'predict' }),
    ).toEqual({ modelName: 'net', tags: ['serve', 'gpu'], signature: 'predict' });
  });
});
