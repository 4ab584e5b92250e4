import { describe, expect, it } from 'vitest';
import { servesModels } from './serves-models.js';

describe('servesModels', () => {
  it('says yes for kiln serve with models named on the command line', () => {
    for (const args of [
      ['serve', '-m', 'mlp=./mlp'],
      ['serve', '-mmlp=./mlp'],
      ['--verbose', 'serve', '--model', 'mlp=./mlp'],
      ['serve', '--model=mlp=./mlp'],
      ['serve', '--model_dir', '/mnt/models'],
      ['serve', '--demo'],
    ])
      expect(servesModels(args), args.join(' ')).toBe(true);
  });

  it('says no for other commands and for serve without models', () => {
    for (const args of [
      [],
      ['predict', '-m', 'mlp=./mlp', '-i', 'x.npy'],
      ['serve'],
      ['serve', '-s', './model-store'],
      ['serve', '--help'],
      ['--version'],
    ])
      expect(servesModels(args), args.join(' ')).toBe(false);
  });
});
