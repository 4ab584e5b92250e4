import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localModelFolders, servesModels } from './serves-models.js';

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

describe('localModelFolders', () => {
  let cwd: string;
  let folder: string;
  beforeAll(() => {
    cwd = mkdtempSync(path.join(os.tmpdir(), 'kiln-folders-'));
    folder = path.join(cwd, 'mlp');
    mkdirSync(folder);
    writeFileSync(path.join(cwd, 'mlp.zip'), 'not unpacked here');
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it('finds the local folders -m, --model and --model_dir name, in order', () => {
    const second = path.join(cwd, 'second');
    mkdirSync(second, { recursive: true });
    for (const [args, expected] of [
      [['serve', '-m', 'mlp=./mlp'], [folder]],
      [['serve', '-m', './mlp'], [folder]],
      [['serve', `-mmlp=${folder}`], [folder]],
      [['serve', `--model=mlp:2=${folder}`], [folder]],
      [['serve', '--model_dir', folder, '--model_name', 'mlp'], [folder]],
      [['serve', '-m', `mlp=${pathToFileURL(folder).href}`], [folder]],
      [
        ['serve', '-m', 'second=second', '-m', 'mlp=mlp'],
        [second, folder],
      ],
    ] as const)
      expect(localModelFolders(args, cwd), args.join(' ')).toEqual(expected);
  });

  it('leaves out what needs the server to resolve: a named engine, archives, URLs, nothing there', () => {
    for (const args of [
      ['serve', '-m', 'mlp::OnnxRuntime=./mlp'],
      ['serve', '-m', 'mlp=./mlp.zip'],
      ['serve', '-m', 'mlp=https://example.com/mlp.zip'],
      ['serve', '-m', 'mlp=./missing'],
      ['serve', '--demo'],
    ])
      expect(localModelFolders(args, cwd), args.join(' ')).toEqual([]);
  });
});
