import { chown, mkdir, mkdtemp, readFile, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { strToU8, zipSync, type Zippable } from 'fflate';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { resolveModelSource } from './model-source.js';

const MODEL_BYTES = Uint8Array.from({ length: 3000 }, (_, i) => (i * 7) % 251);

describe('resolveModelSource', () => {
  let work: string;
  let cacheDir: string;
  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-source-'));
    cacheDir = path.join(work, 'cache');
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  /** A model folder on disk: model.onnx, serving.properties and a nested vocabulary. */
  async function modelFolder(name = 'resnet'): Promise<string> {
    const dir = path.join(work, name);
    await mkdir(path.join(dir, 'assets'), { recursive: true });
    await writeFile(path.join(dir, 'model.onnx'), MODEL_BYTES);
    await writeFile(path.join(dir, 'serving.properties'), 'engine=OnnxRuntime\n');
    await writeFile(path.join(dir, 'assets/vocab.txt'), 'a\nb\n');
    return dir;
  }

  async function expectModelFiles(dir: string): Promise<void> {
    expect(Buffer.from(await readFile(path.join(dir, 'model.onnx'))).equals(MODEL_BYTES)).toBe(
      true,
    );
    expect(await readFile(path.join(dir, 'assets/vocab.txt'), 'utf8')).toBe('a\nb\n');
  }

  const EXPECTED_FILES = ['assets/vocab.txt', 'model.onnx', 'serving.properties'];
  const EXPECTED_SIZE = MODEL_BYTES.length + 4 + 'engine=OnnxRuntime\n'.length;

  it('takes a folder by absolute path, relative path and file:// URL', async () => {
    const dir = await modelFolder();
    for (const url of [dir, path.relative(process.cwd(), dir), pathToFileURL(dir).href]) {
      const source = await resolveModelSource(url, { cacheDir });
      expect(source).toEqual({ dir, files: EXPECTED_FILES, sizeBytes: EXPECTED_SIZE });
    }
  });

  it('takes a single model file: its folder is the model folder', async () => {
    const dir = await modelFolder();
    const file = path.join(dir, 'model.onnx');
    const source = await resolveModelSource(pathToFileURL(file).href, { cacheDir });
    expect(source).toEqual({
      dir,
      modelFile: file,
      files: ['model.onnx'],
      sizeBytes: MODEL_BYTES.length,
    });
  });

  const zipContent = (): Zippable => ({
    'model.onnx': MODEL_BYTES,
    'serving.properties': strToU8('engine=OnnxRuntime\n'),
    'assets/': {},
    'assets/vocab.txt': strToU8('a\nb\n'),
  });

  it.each([
    ['stored', 0],
    ['deflated', 9],
  ] as const)('extracts a %s zip into the cache', async (_kind, level) => {
    const archive = path.join(work, 'resnet.zip');
    await writeFile(archive, zipSync(zipContent(), { level }));
    const source = await resolveModelSource(archive, { cacheDir });
    expect(source.archive).toBe(archive);
    expect(path.dirname(source.dir)).toBe(cacheDir);
    expect(path.basename(source.dir)).toMatch(/^resnet-[0-9a-f]{16}$/);
    expect(source.files).toEqual(EXPECTED_FILES);
    expect(source.sizeBytes).toBe(EXPECTED_SIZE);
    await expectModelFiles(source.dir);
  });

  it.each([
    ['resnet.tar', false],
    ['resnet.tar.gz', true],
    ['resnet.tgz', true],
  ] as const)('extracts %s built by the tar package', async (name, gzip) => {
    await modelFolder('src');
    const archive = path.join(work, name);
    await tar.c({ file: archive, gzip, cwd: path.join(work, 'src') }, [
      'model.onnx',
      'serving.properties',
      'assets',
    ]);
    const source = await resolveModelSource(pathToFileURL(archive).href, { cacheDir });
    expect(source.files).toEqual(EXPECTED_FILES);
    expect(source.sizeBytes).toBe(EXPECTED_SIZE);
    await expectModelFiles(source.dir);
  });

  it('uses a single top-level folder of an archive as the model folder', async () => {
    await modelFolder('resnet18');
    const tgz = path.join(work, 'packed.tar.gz');
    await tar.c({ file: tgz, gzip: true, cwd: work }, ['resnet18']);
    const fromTar = await resolveModelSource(tgz, { cacheDir });
    expect(path.basename(fromTar.dir)).toBe('resnet18');
    expect(fromTar.files).toEqual(EXPECTED_FILES);

    // Hidden entries and macOS resource forks beside the folder do not count.
    const zip = path.join(work, 'packed.zip');
    await writeFile(
      zip,
      zipSync({
        bert: zipContent(),
        '.DS_Store': strToU8('x'),
        __MACOSX: { '._bert': strToU8('y') },
      }),
    );
    const fromZip = await resolveModelSource(zip, { cacheDir });
    expect(path.basename(fromZip.dir)).toBe('bert');
    await expectModelFiles(fromZip.dir);
  });

  it('keeps the extraction root when the archive holds more than one top-level entry', async () => {
    const zip = path.join(work, 'two.zip');
    await writeFile(zip, zipSync({ a: { 'x.bin': strToU8('1') }, 'b.bin': strToU8('2') }));
    const source = await resolveModelSource(zip, { cacheDir });
    expect(path.dirname(source.dir)).toBe(cacheDir);
    expect(source.files).toEqual(['a/x.bin', 'b.bin']);
  });

  it('reuses a complete extraction while the archive is unchanged', async () => {
    const archive = path.join(work, 'resnet.zip');
    const bytes = zipSync(zipContent());
    await writeFile(archive, bytes);
    // Whole seconds, so the times can be set again exactly.
    const atime = new Date(1_700_000_000_000);
    const mtime = new Date(1_700_000_001_000);
    await utimes(archive, atime, mtime);
    const first = await resolveModelSource(archive, { cacheDir });

    // Same size and time but unreadable content: only a reused extraction can succeed.
    await writeFile(archive, Buffer.alloc(bytes.length, 0x55));
    await utimes(archive, atime, mtime);
    const second = await resolveModelSource(archive, { cacheDir });
    expect(second).toEqual(first);
    expect(await readdir(cacheDir)).toHaveLength(1);

    // A changed time is a changed archive: it is extracted afresh (and this one is damaged).
    await utimes(archive, atime, new Date(mtime.getTime() + 5000));
    await expect(resolveModelSource(archive, { cacheDir })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidInput,
    });
    expect(await readdir(cacheDir)).toEqual([path.basename(first.dir)]);
  });

  it('shares one extraction between concurrent loads', async () => {
    const archive = path.join(work, 'resnet.tgz');
    await modelFolder('src');
    await tar.c({ file: archive, gzip: true, cwd: path.join(work, 'src') }, ['.']);
    const sources = await Promise.all(
      [1, 2, 3].map(() => resolveModelSource(archive, { cacheDir })),
    );
    expect(new Set(sources.map((s) => s.dir)).size).toBe(1);
    expect(await readdir(cacheDir)).toHaveLength(1);
    await expectModelFiles(sources[0]!.dir);
  });

  it.each([
    'http://example.com/resnet.zip',
    'https://example.com/resnet.zip',
    's3://bucket/resnet.tar.gz',
    'djl://ai.djl.zoo/resnet',
    'hf://org/model',
    'file://fileserver/share/model.onnx',
  ])('refuses remote %s with URL_NOT_ALLOWED', async (url) => {
    await expect(resolveModelSource(url, { cacheDir })).rejects.toMatchObject({
      code: KilnErrorCode.UrlNotAllowed,
      message: expect.stringContaining('download it first') as unknown,
    });
  });

  it('reports missing paths as MODEL_NOT_FOUND', async () => {
    for (const url of [
      path.join(work, 'nope'),
      pathToFileURL(path.join(work, 'nope.zip')).href,
      'no/such/relative/model.onnx',
    ]) {
      await expect(resolveModelSource(url, { cacheDir })).rejects.toMatchObject({
        code: KilnErrorCode.ModelNotFound,
      });
    }
  });

  it.each(['damaged.zip', 'damaged.tar.gz', 'damaged.tar'])(
    'refuses a damaged %s with INVALID_INPUT and leaves nothing behind',
    async (name) => {
      const archive = path.join(work, name);
      await writeFile(archive, Buffer.from('this is not an archive, just some text '.repeat(40)));
      await expect(resolveModelSource(archive, { cacheDir })).rejects.toMatchObject({
        code: KilnErrorCode.InvalidInput,
      });
      expect(await readdir(cacheDir)).toEqual([]);
    },
  );

  it('refuses invalid limits with INVALID_CONFIG', async () => {
    const archive = path.join(work, 'm.zip');
    await writeFile(archive, zipSync(zipContent()));
    await expect(
      resolveModelSource(archive, { cacheDir, maxArchiveBytes: -1 }),
    ).rejects.toMatchObject({ code: KilnErrorCode.InvalidConfig });
  });

  it.skipIf(process.getuid?.() !== 0)(
    'refuses a cache folder owned by another user (extractions there could be planted)',
    async () => {
      const archive = path.join(work, 'm.zip');
      await writeFile(archive, zipSync(zipContent()));
      await mkdir(cacheDir);
      await chown(cacheDir, 4242, 4242);
      await expect(resolveModelSource(archive, { cacheDir })).rejects.toMatchObject({
        code: KilnErrorCode.InvalidConfig,
      });
      expect(await readdir(cacheDir)).toEqual([]);
    },
  );
});
