import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { listModelFiles } from './model-files.js';

describe('listModelFiles', () => {
  let work: string;
  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-files-'));
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  async function put(relative: string, content: string): Promise<void> {
    await mkdir(path.dirname(path.join(work, relative)), { recursive: true });
    await writeFile(path.join(work, relative), content);
  }

  it('lists files recursively as sorted relative POSIX paths with their total size', async () => {
    await put('model/weights/b.bin', '12345');
    await put('model/model.onnx', 'abc');
    await put('model/serving.properties', 'engine=OnnxRuntime');
    await mkdir(path.join(work, 'model/empty'));
    const listing = await listModelFiles(path.join(work, 'model'));
    expect(listing.files).toEqual(['model.onnx', 'serving.properties', 'weights/b.bin']);
    expect(listing.sizeBytes).toBe(5 + 3 + 'engine=OnnxRuntime'.length);
  });

  it('counts symlinked files but does not follow symlinked folders or dangling links', async () => {
    await put('outside/secret.bin', 'secret');
    await put('store/blob', '0123456789');
    await put('model/model.onnx', 'abc');
    await symlink(path.join(work, 'store/blob'), path.join(work, 'model/linked.bin'));
    await symlink(path.join(work, 'outside'), path.join(work, 'model/outside'));
    await symlink(path.join(work, 'model'), path.join(work, 'model/loop'));
    await symlink(path.join(work, 'missing'), path.join(work, 'model/dangling'));
    const listing = await listModelFiles(path.join(work, 'model'));
    expect(listing.files).toEqual(['linked.bin', 'model.onnx']);
    expect(listing.sizeBytes).toBe(13);
  });

  it('refuses a folder with more entries than allowed', async () => {
    for (let i = 0; i < 6; i += 1) await put(`m/f${i}.bin`, 'x');
    await expect(listModelFiles(path.join(work, 'm'), { maxEntries: 5 })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidInput,
    });
    expect((await listModelFiles(path.join(work, 'm'), { maxEntries: 6 })).files).toHaveLength(6);
  });

  it('refuses a folder nested deeper than allowed', async () => {
    await put('m/a/b/c/deep.bin', 'x');
    await expect(listModelFiles(path.join(work, 'm'), { maxDepth: 2 })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidInput,
    });
    expect((await listModelFiles(path.join(work, 'm'), { maxDepth: 3 })).files).toEqual([
      'a/b/c/deep.bin',
    ]);
  });

  it('reports a missing folder as INVALID_INPUT', async () => {
    await expect(listModelFiles(path.join(work, 'nope'))).rejects.toMatchObject({
      code: KilnErrorCode.InvalidInput,
    });
  });
});
