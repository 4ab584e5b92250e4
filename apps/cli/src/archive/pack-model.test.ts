import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { terminalProgress } from '@kiln/benchmark';
import { resolveModelSource } from '@kiln/core';
import { loadEngineCatalog } from '@kiln/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { listPackedFiles } from './model-folder-files.js';
import { archiveFormatFor, assertOutsideFolder, packModel } from './pack-model.js';

const run = await ortAvailable();

describe('archiveFormatFor', () => {
  it('knows zip, tar.gz, tgz and tar by name only', () => {
    expect(['m.zip', 'm.ZIP', 'm.tar.gz', 'm.tgz', 'm.tar', 'm.7z'].map(archiveFormatFor)).toEqual([
      'zip',
      'zip',
      'tar.gz',
      'tar.gz',
      'tar',
      undefined,
    ]);
  });
});

describe.skipIf(!run)('packModel', () => {
  let models: TestModels;
  const engines = loadEngineCatalog(['@kiln/engine-onnxruntime']);

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-pack-');
  });
  afterAll(async () => {
    await models?.remove();
  });

  it.each(['zip', 'tar.gz', 'tar'] as const)(
    'writes a %s that Kiln reads back file for file',
    async (format) => {
      const target = path.join(models.root, `iris-${format.replace('.', '-')}.${format}`);
      const packed = await packModel(models.iris, target, {
        format,
        level: 6,
        load: true,
        engines: await engines,
      });
      expect(packed).toMatchObject({
        files: 4,
        engine: 'OnnxRuntime',
        translator: 'translator.mjs',
        hasServingProperties: true,
        loaded: true,
      });
      const source = await resolveModelSource(target, {
        cacheDir: path.join(models.root, `cache-${format}`),
      });
      expect(source.files).toEqual([
        'model.onnx',
        'serving.properties',
        'synset.txt',
        'translator.mjs',
      ]);
      for (const file of source.files) {
        expect(await readFile(path.join(source.dir, file))).toEqual(
          await readFile(path.join(models.iris, file)),
        );
      }
    },
  );

  it('keeps nested folders and stores files as they are at level 0', async () => {
    const dir = path.join(models.root, 'nested');
    await mkdir(path.join(dir, 'assets', 'vocab'), { recursive: true });
    await writeFile(path.join(dir, 'assets', 'vocab', 'words.txt'), 'a\nb\n'.repeat(1000));
    await writeFile(
      path.join(dir, 'model.onnx'),
      await readFile(path.join(models.tiny, 'model.onnx')),
    );
    await writeFile(path.join(dir, 'serving.properties'), 'engine=OnnxRuntime\n');
    const target = path.join(models.root, 'nested.zip');
    const packed = await packModel(dir, target, {
      format: 'zip',
      level: 0,
      load: true,
      engines: await engines,
    });
    expect(packed.files).toBe(3);
    // Stored, not deflated: the archive is at least as large as its files.
    expect(packed.archiveBytes).toBeGreaterThan(packed.bytes);
    const source = await resolveModelSource(target, {
      cacheDir: path.join(models.root, 'cache-nested'),
    });
    expect(source.files).toContain('assets/vocab/words.txt');
  });

  it('shows its progress on a terminal in human units, not byte counts', async () => {
    const dir = path.join(models.root, 'weighty');
    await mkdir(dir);
    await writeFile(
      path.join(dir, 'model.onnx'),
      await readFile(path.join(models.tiny, 'model.onnx')),
    );
    await writeFile(path.join(dir, 'weights.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
    let drawn = '';
    const terminal = Object.assign(
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          drawn += chunk.toString();
          done();
        },
      }),
      { isTTY: true, columns: 120, cursorTo: () => true, clearLine: () => true },
    ) as unknown as NodeJS.WriteStream;
    await packModel(dir, path.join(models.root, 'weighty.zip'), {
      format: 'zip',
      level: 0,
      load: false,
      engines: await engines,
      progress: terminalProgress(terminal),
    });
    expect(drawn).toMatch(/packing \[.*\] \d+% [\d.]+ (B|KiB|MiB)\/3\.0 MiB/);
    expect(drawn).not.toMatch(/\d{5,}/);
  });

  it('refuses symlinks, even to files inside the folder', async () => {
    const dir = path.join(models.root, 'linked');
    await mkdir(dir);
    await writeFile(
      path.join(dir, 'model.onnx'),
      await readFile(path.join(models.tiny, 'model.onnx')),
    );
    await symlink(path.join(models.iris, 'synset.txt'), path.join(dir, 'synset.txt'));
    await expect(listPackedFiles(dir)).rejects.toMatchObject({
      code: 'ARCHIVE_UNSAFE',
      message: expect.stringMatching(/synset\.txt is a symbolic link/),
    });
  });

  it('refuses a translator plugin outside the folder before writing anything', async () => {
    const dir = path.join(models.root, 'escape');
    await mkdir(dir);
    await writeFile(
      path.join(dir, 'model.onnx'),
      await readFile(path.join(models.tiny, 'model.onnx')),
    );
    await writeFile(
      path.join(dir, 'serving.properties'),
      'engine=OnnxRuntime\ntranslatorFactory=../iris/translator.mjs\n',
    );
    const target = path.join(models.root, 'escape.zip');
    await expect(
      packModel(dir, target, { format: 'zip', level: 6, load: true, engines: await engines }),
    ).rejects.toMatchObject({
      message: expect.stringMatching(/leads outside the model folder/),
    });
    await expect(readFile(target)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses to write the archive inside the folder it packs', async () => {
    await expect(
      assertOutsideFolder(models.iris, path.join(models.iris, 'iris.zip')),
    ).rejects.toThrow(/inside the folder it would pack/);
    await expect(
      assertOutsideFolder(models.iris, path.join(models.root, 'iris.zip')),
    ).resolves.toBeUndefined();
  });

  it('refuses a folder no engine recognises', async () => {
    const dir = path.join(models.root, 'unknown');
    await mkdir(dir);
    await writeFile(path.join(dir, 'weights.bin'), 'x');
    await expect(
      packModel(dir, path.join(models.root, 'unknown.zip'), {
        format: 'zip',
        level: 6,
        load: false,
        engines: await engines,
      }),
    ).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringMatching(/no installed engine recognises/),
    });
  });
});
